"""What an agent's sandbox shows, as bubblewrap arguments (pure)."""

from __future__ import annotations

from harness.sandbox.layout import (
    BRIDGE_INSIDE,
    HOME_INSIDE,
    SOCKET_INSIDE,
    SandboxLayout,
    bwrap_args,
    launcher_script,
)
from harness.workspaces.git_view import Bind

LAYOUT = SandboxLayout(
    cwd="/w/t-1",
    binds=(
        Bind("/w/t-1", "/w/t-1", writable=True),
        Bind("/repo/.git", "/repo/.git", writable=False),
        Bind("/repo/.git/worktrees/t-1", "/repo/.git/worktrees/t-1", writable=True),
    ),
    readable=("/usr", "/etc", "/py"),
    masked=(("/etc/shadow", False), ("/etc/ssh", True)),
    socket="/tmp/h-1/egress.sock",
    bridge="/site/harness/sandbox/bridge.py",
    python="/py/bin/python3.11",
    cli="/site/claude",
    unset_env=("ANTHROPIC_API_KEY",),
    set_env={"GIT_OBJECT_DIRECTORY": "/x/objects"},
    hidden=(("/w/t-1/config.yaml", False), ("/w/t-1/.agents/tasks", True)),
)


def pairs(args: list[str], flag: str) -> list[tuple[str, str]]:
    return [(args[i + 1], args[i + 2]) for i, a in enumerate(args) if a == flag]


def test_the_system_is_read_only_and_only_the_worktree_and_its_git_are_writable() -> None:
    args = bwrap_args(LAYOUT)

    assert ("/usr", "/usr") in pairs(args, "--ro-bind")
    assert ("/repo/.git", "/repo/.git") in pairs(args, "--ro-bind")
    assert pairs(args, "--bind") == [
        ("/w/t-1", "/w/t-1"),
        ("/repo/.git/worktrees/t-1", "/repo/.git/worktrees/t-1"),
        ("/tmp/h-1/egress.sock", SOCKET_INSIDE),
    ]
    # The writable admin folder goes over the read-only git directory, in that order.
    assert args.index("/repo/.git") < args.index("/repo/.git/worktrees/t-1")


def test_it_has_its_own_namespaces_private_tmp_and_home_and_dies_with_the_harness() -> None:
    args = bwrap_args(LAYOUT)

    assert {"--unshare-all", "--die-with-parent", "--new-session"} <= set(args)
    assert "--share-net" not in args
    assert ("/tmp", "--tmpfs") in zip(args[1:], args, strict=False)
    assert [args[i + 1] for i, a in enumerate(args) if a == "--tmpfs"][:2] == ["/tmp", HOME_INSIDE]


def test_the_machines_secrets_are_shown_empty() -> None:
    args = bwrap_args(LAYOUT)

    assert ("/dev/null", "/etc/shadow") in pairs(args, "--ro-bind")
    assert args[args.index("/etc/ssh") - 1] == "--tmpfs"


def test_the_harnesss_own_files_under_the_agents_folder_are_shown_empty_over_it() -> None:
    args = bwrap_args(LAYOUT)

    worktree = args.index("/w/t-1")
    assert args.index("/w/t-1/config.yaml") > worktree
    assert args[args.index("/w/t-1/config.yaml") - 2 :][:2] == ["--ro-bind", "/dev/null"]
    assert args[args.index("/w/t-1/.agents/tasks") - 1] == "--tmpfs"


def test_the_key_is_unset_and_the_bridge_starts_the_cli_in_the_worktree() -> None:
    args = bwrap_args(LAYOUT)

    assert args[args.index("--unsetenv") :][:2] == ["--unsetenv", "ANTHROPIC_API_KEY"]
    assert ("HOME", HOME_INSIDE) in pairs(args, "--setenv")
    assert ("GIT_OBJECT_DIRECTORY", "/x/objects") in pairs(args, "--setenv")
    command = args[args.index("--") + 1 :]
    assert command == [
        "/py/bin/python3.11",
        "-I",
        "-S",
        BRIDGE_INSIDE,
        SOCKET_INSIDE,
        "/site/claude",
    ]
    assert args[args.index("--chdir") + 1] == "/w/t-1"


def test_the_launcher_execs_bwrap_with_the_clis_own_arguments_after() -> None:
    script = launcher_script("/bin/bwrap", LAYOUT)

    assert script.startswith("#!/bin/sh\n")
    assert script.rstrip().endswith('/site/claude "$@"')
    assert "exec /bin/bwrap --unshare-all" in script
