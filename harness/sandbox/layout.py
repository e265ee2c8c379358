"""What an agent's sandbox shows, as bubblewrap arguments: pure, from plain data.

Inside: the system read-only (``/usr``, the libraries, and of ``/etc`` only what a
toolchain reads), the harness's Python and the Claude Code CLI read-only, the agent's working
folder writable (and the parts of its git directory the agent may write), a private ``/tmp``
and home, its own pid, network, IPC and UTS namespaces, and one Unix socket: its only way out
(``bridge.py``). The harness's data, other tasks' worktrees, the operator's home and the rest
of ``/etc`` (``/etc/harness``, key files, credentials) are simply not there. Its environment
is an allow-list (``environment.py``): bubblewrap starts from an empty one.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from harness.config.env_name import SHELL_NAME

# Where the sandbox's own parts appear inside it.
RUN_DIR = "/run/harness"
SOCKET_INSIDE = f"{RUN_DIR}/egress.sock"
BRIDGE_INSIDE = f"{RUN_DIR}/bridge.py"
HOME_INSIDE = "/home/agent"

# Runs the launcher's bubblewrap with an empty environment: bubblewrap's --clearenv clears
# only what its children get, and its own (the sandbox's pid 1, in /proc/1/environ) would
# still hold the harness's.
ENV_PROGRAM = "/usr/bin/env"

# The system, read-only; missing ones are skipped (merged /usr, no 32-bit libraries...).
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Of /etc, only what toolchains read (globs of names in /etc): the dynamic linker, users and
# groups, name and service lookup, the time zone, TLS roots, the alternatives /usr links to,
# file types, Python's and Java's own settings, the system's name and version. Not shown:
# the harness's (/etc/harness, its env file), keys, credentials, shadow, sudoers, ssh, git's
# and pip's and npm's system settings (they can hold tokens).
ETC_ENTRIES = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "nsswitch.conf",
    "passwd",
    "group",
    "hosts",
    "host.conf",
    "gai.conf",
    "resolv.conf",
    "services",
    "protocols",
    "networks",
    "localtime",
    "timezone",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "pki",
    "crypto-policies",
    "alternatives",
    "mime.types",
    "magic",
    "magic.mime",
    "python3",
    "python3.*",
    "java-*",
    "os-release",
    "lsb-release",
    "debian_version",
    "mtab",
    "shells",
    "inputrc",
    "locale.alias",
    "terminfo",
)
# Secrets under what is shown, hidden (shown empty) where they exist.
MASKED_PATHS = ("/etc/ssl/private",)


# What every sandbox of the harness starts from: its own namespaces, /proc, /dev and /tmp.
ISOLATION = (
    "--unshare-all",  # user (where it can), pid, network, IPC, UTS and cgroup namespaces
    "--die-with-parent",  # the harness's kill (even SIGKILL) takes the whole sandbox
    "--new-session",  # no ioctl can push keystrokes into the harness's terminal
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--tmpfs",
    "/tmp",
)


@dataclass(frozen=True)
class Bind:
    """A host folder or file shown inside the sandbox, read-only unless ``writable``."""

    source: str  # host path
    target: str  # path inside the sandbox (most often the same as source)
    writable: bool


@dataclass(frozen=True)
class SandboxLayout:
    """One agent's sandbox. Paths are the host's; ``binds`` go in order, a later one over an
    earlier one (a writable git admin folder inside a read-only git directory)."""

    cwd: str
    binds: tuple[Bind, ...]
    # Host paths shown read-only at the same place: the system, the Python, the CLI's folder.
    readable: tuple[str, ...]
    # Existing files and folders under ``readable`` shown empty: (path, is_folder).
    masked: tuple[tuple[str, bool], ...]
    socket: str  # the egress proxy's Unix socket on the host
    bridge: str  # bridge.py on the host
    python: str  # the interpreter that runs the bridge (under ``readable``)
    cli: str  # the Claude Code CLI (under ``readable``)
    # The environment inside: these names with the values they have when the launcher runs
    # (unset ones stay unset), then ``set_env``'s (over them); nothing else.
    pass_env: tuple[str, ...] = ()
    set_env: Mapping[str, str] = field(default_factory=dict)
    # The harness's own files under ``binds``, shown empty over them: (path, is_folder).
    hidden: tuple[tuple[str, bool], ...] = ()
    # Symbolic links made inside, as the host has them (/etc/localtime, /etc/mtab):
    # (path, target), resolved inside, so a link never shows what it points to outside.
    links: tuple[tuple[str, str], ...] = ()


def bwrap_args(layout: SandboxLayout) -> list[str]:
    """bubblewrap's arguments up to the command, and the command: the bridge, which execs
    the CLI with the arguments that follow (the launcher appends them). The environment is
    cleared, then ``set_env`` and its home set; ``launcher_script`` adds ``pass_env``."""
    args = [*ISOLATION, "--tmpfs", HOME_INSIDE]
    for path in layout.readable:
        args += ["--ro-bind", path, path]
    for path, target in layout.links:
        args += ["--symlink", target, path]
    for path, is_folder in layout.masked:
        args += shown_empty(path, is_folder)
    for bind in layout.binds:
        args += ["--bind" if bind.writable else "--ro-bind", bind.source, bind.target]
    for path, is_folder in layout.hidden:
        args += shown_empty(path, is_folder)
    args += ["--ro-bind", layout.bridge, BRIDGE_INSIDE, "--bind", layout.socket, SOCKET_INSIDE]
    args += ["--clearenv"]
    env = {**layout.set_env, "HOME": HOME_INSIDE, "TMPDIR": "/tmp"}
    for name, value in env.items():
        args += ["--setenv", name, value]
    args += ["--chdir", layout.cwd, "--"]
    args += [layout.python, "-I", "-S", BRIDGE_INSIDE, SOCKET_INSIDE, layout.cli]
    return args


def shown_empty(path: str, is_folder: bool) -> list[str]:
    """Shows ``path`` empty and read-only."""
    if is_folder:
        return ["--tmpfs", path, "--remount-ro", path]
    return ["--ro-bind", "/dev/null", path]


def etc_shown(names: Iterable[str], etc: str = "/etc") -> tuple[str, ...]:
    """The entries of ``etc`` (its listing: ``names``) the sandbox shows, sorted."""
    return tuple(
        f"{etc}/{name}"
        for name in sorted(names)
        if any(fnmatchcase(name, pattern) for pattern in ETC_ENTRIES)
    )


def launcher_script(bwrap: str, layout: SandboxLayout) -> str:
    """An executable (``cli_path`` for the SDK) that starts the CLI in this sandbox with the
    arguments it is given; ``exec`` keeps bwrap the harness's own child. Each name of
    ``pass_env`` set in the launcher's environment (the SDK's, for the CLI) is passed on with
    its value, expanded by the shell in double quotes, so no value is ever read as shell:
    to bwrap's own environment (the run id finds it, ``runtime/orphans.py``) and, after
    ``--clearenv``, inside. Pure."""
    args = bwrap_args(layout)
    cut = args.index("--clearenv") + 1
    for name in layout.pass_env:
        if not SHELL_NAME.match(name):
            raise ValueError(f"{name!r} is not a variable name a shell can expand")
    # Each `set --` puts words in front of those already there: built from the end.
    inside = [
        f'if [ -n "${{{name}+x}}" ]; then set -- --setenv {name} "${name}" "$@"; fi'
        for name in reversed(layout.pass_env)
    ]
    own = [
        f'if [ -n "${{{name}+x}}" ]; then set -- "{name}=${name}" "$@"; fi'
        for name in reversed(layout.pass_env)
    ]
    lines = [
        "#!/bin/sh",
        "# Written by the harness for one agent run: the Claude Code CLI in its sandbox.",
        f'set -- {_words(args[cut:])} "$@"',
        *inside,
        f'set -- {_words([bwrap, *args[:cut]])} "$@"',
        *own,
        f'exec {ENV_PROGRAM} -i "$@"',
    ]
    return "\n".join(lines) + "\n"


def _words(words: Iterable[str]) -> str:
    return " ".join(shlex.quote(word) for word in words)
