"""Host names in the egress proxy's requests and in ``sandbox.network.allow``. Pure.

A name from inside the sandbox is only ever one the proxy can show exactly: an RFC 1123 host
name whose last label starts with a letter (so no ``1.2.3`` or ``0x7f000001`` that the
resolver would read as an address), or an IPv4 or IPv6 literal. ``pypi.org/.evil.com`` is
neither, so it is refused rather than asked about looking like ``pypi.org``.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence

_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")


def host_allowed(host: str, port: int, allow: Sequence[str]) -> bool:
    """Whether ``host:port`` matches an entry of ``allow``: ``name`` (any port), ``*.name`` (any
    subdomain of name, not name itself), ``name:port`` (that port only); IPv6 literals in
    brackets (``[::1]:443``). Case and a trailing dot do not matter. A malformed entry is a
    ValueError."""
    name = normal(host)
    for entry in allow:
        pattern, only_port = parse_entry(entry)
        if only_port is not None and only_port != port:
            continue
        if pattern.startswith("*."):
            suffix = pattern[1:]
            if name.endswith(suffix) and len(name) > len(suffix):
                return True
        elif name == pattern:
            return True
    return False


def valid_host(host: str) -> bool:
    """Whether ``host`` (normalised, IPv6 without brackets) is a host name or an IP literal."""
    if ":" in host:
        if "%" in host:  # a zone (fe80::1%eth0) is this machine's, not a place to reach
            return False
        try:
            ipaddress.IPv6Address(host)  # a zone (%eth0) or anything else: not an address
        except ValueError:
            return False
        return True
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        pass
    else:
        return True
    labels = host.split(".")
    return (
        0 < len(host) <= 253
        and all(_LABEL.fullmatch(label) for label in labels)
        and labels[-1][0].isalpha()
    )


def normal(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host.removesuffix(".")


def split_authority(text: str) -> tuple[str, int | None]:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port`` -> (host, port or None)."""
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ValueError(f"not host[:port]: {text!r}")
        port = rest[1:] if rest else None
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    else:
        host, port = text, None  # a name, or a bare IPv6 literal (several colons, no port)
    if port is not None and not (port.isdigit() and 0 < int(port) < 65536):
        raise ValueError(f"not a port: {port!r}")
    return host, None if port is None else int(port)


def parse_entry(entry: str) -> tuple[str, int | None]:
    host, port = split_authority(entry.strip().lower())
    host = host.removesuffix(".")
    if not host or "*" in host.removeprefix("*.") or host == "*.":
        raise ValueError(f"not an allowed-host entry: {entry!r}")
    return host, port


def shown(host: str, port: int) -> str:
    """``host:port`` as a URL would have it (IPv6 in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
