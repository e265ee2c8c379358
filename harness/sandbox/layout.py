"""What an agent's sandbox shows, as bubblewrap arguments: pure, from plain data.

Inside: the system read-only (``/usr``, ``/etc`` less its secrets, the libraries), the
harness's Python and the Claude Code CLI read-only, the agent's working folder writable (and
the parts of its git directory the agent may write), a private ``/tmp`` and home, its own pid,
network, IPC and UTS namespaces, and one Unix socket: its only way out (``bridge.py``). The
harness's data, other tasks' worktrees and the operator's home are simply not there.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

from harness.workspaces.git_view import Bind

# Where the sandbox's own parts appear inside it.
RUN_DIR = "/run/harness"
SOCKET_INSIDE = f"{RUN_DIR}/egress.sock"
BRIDGE_INSIDE = f"{RUN_DIR}/bridge.py"
HOME_INSIDE = "/home/agent"

# The system, read-only; missing ones are skipped (merged /usr, no 32-bit libraries...).
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# Secrets of the machine under those, hidden (shown empty) where they exist.
MASKED_PATHS = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh",
    "/etc/ssl/private",
)


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
    unset_env: tuple[str, ...] = ()
    set_env: Mapping[str, str] = field(default_factory=dict)
    # The harness's own files under ``binds``, shown empty over them: (path, is_folder).
    hidden: tuple[tuple[str, bool], ...] = ()


def bwrap_args(layout: SandboxLayout) -> list[str]:
    """bubblewrap's arguments up to the command, and the command: the bridge, which execs
    the CLI with the arguments that follow (the launcher appends them)."""
    args = [
        "--unshare-all",  # user (where it can), pid, network, IPC, UTS and cgroup namespaces
        "--die-with-parent",  # the harness's kill (even SIGKILL) takes the whole sandbox
        "--new-session",  # no ioctl can push keystrokes into the harness's terminal
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        "--tmpfs",
        HOME_INSIDE,
    ]
    for path in layout.readable:
        args += ["--ro-bind", path, path]
    for path, is_folder in layout.masked:
        args += _empty(path, is_folder)
    for bind in layout.binds:
        args += ["--bind" if bind.writable else "--ro-bind", bind.source, bind.target]
    for path, is_folder in layout.hidden:
        args += _empty(path, is_folder)
    args += ["--ro-bind", layout.bridge, BRIDGE_INSIDE, "--bind", layout.socket, SOCKET_INSIDE]
    for name in layout.unset_env:
        args += ["--unsetenv", name]
    env = {"HOME": HOME_INSIDE, "TMPDIR": "/tmp", **layout.set_env}
    for name, value in env.items():
        args += ["--setenv", name, value]
    args += ["--chdir", layout.cwd, "--"]
    args += [layout.python, "-I", "-S", BRIDGE_INSIDE, SOCKET_INSIDE, layout.cli]
    return args


def _empty(path: str, is_folder: bool) -> list[str]:
    """Shows ``path`` empty and read-only."""
    if is_folder:
        return ["--tmpfs", path, "--remount-ro", path]
    return ["--ro-bind", "/dev/null", path]


def launcher_script(bwrap: str, layout: SandboxLayout) -> str:
    """An executable (``cli_path`` for the SDK) that starts the CLI in this sandbox with the
    arguments it is given; ``exec`` keeps bwrap the harness's own child. Pure."""
    words = " ".join(shlex.quote(word) for word in (bwrap, *bwrap_args(layout)))
    return (
        "#!/bin/sh\n"
        "# Written by the harness for one agent run: the Claude Code CLI in its sandbox.\n"
        f'exec {words} "$@"\n'
    )
