"""What an agent's sandbox shows, as bubblewrap arguments (pure)."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest

from harness.sandbox.layout import (
    BRIDGE_INSIDE,
    HOME_INSIDE,
    SOCKET_INSIDE,
    Bind,
    SandboxLayout,
    bwrap_args,
    etc_shown,
    launcher_script,
)

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
    pass_env=("LANG", "PATH"),
    set_env={"GIT_OBJECT_DIRECTORY": "/x/objects", "HOME": "/root"},
    hidden=(("/w/t-1/config.yaml", False), ("/w/t-1/.agents/tasks", True)),
    links=(("/etc/localtime", "/usr/share/zoneinfo/UTC"),),
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


def test_the_environment_is_cleared_and_the_bridge_starts_the_cli_in_the_worktree() -> None:
    args = bwrap_args(LAYOUT)

    assert "--unsetenv" not in args
    clear = args.index("--clearenv")
    assert clear < args.index("--setenv")  # nothing set before is left
    assert ("HOME", HOME_INSIDE) in pairs(args, "--setenv")  # its own, whatever it is given
    assert ("HOME", "/root") not in pairs(args, "--setenv")
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


def test_links_of_etc_are_made_inside_not_followed_outside() -> None:
    args = bwrap_args(LAYOUT)

    assert ("/usr/share/zoneinfo/UTC", "/etc/localtime") in pairs(args, "--symlink")
    assert "/etc/localtime" not in [target for _, target in pairs(args, "--ro-bind")]


def test_only_toolchain_entries_of_etc_are_shown() -> None:
    listing = [
        "passwd", "group", "ld.so.cache", "ld.so.conf.d", "ssl", "python3.11", "java-17-openjdk",
        "harness", "harness-env", "shadow", "sudoers", "ssh", "environment", "gitconfig",
        "pip.conf", "npmrc", "nats.creds", "hostname",
    ]  # fmt: skip

    shown = etc_shown(listing)

    assert shown == tuple(
        f"/etc/{name}"
        for name in sorted(
            ["passwd", "group", "ld.so.cache", "ld.so.conf.d", "ssl", "python3.11",
             "java-17-openjdk"]
        )
    )  # fmt: skip
    assert etc_shown(["hosts"], etc="/other") == ("/other/hosts",)


def test_the_launcher_execs_bwrap_without_the_harnesss_environment_and_passes_the_allowed(
    tmp_path: Path,
) -> None:
    script = launcher_script("/bin/bwrap", LAYOUT)

    assert script.startswith("#!/bin/sh\n")
    # bubblewrap itself (the sandbox's pid 1) starts with the allowed environment only.
    assert script.rstrip().splitlines()[-1] == 'exec /usr/bin/env -i "$@"'
    # What the shell makes of it: bwrap's environment and arguments.
    fake = tmp_path / "bwrap"
    fake.write_text(
        '#!/bin/sh\nenv | sed "s/^/env: /"\nfor a in "$@"; do printf "%s\\n" "$a"; done\n'
    )
    fake.chmod(0o755)
    runnable = tmp_path / "launcher"
    runnable.write_text(script.replace("/bin/bwrap", str(fake)))
    runnable.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "SECRET": "s3cret", "LANG": 'it\'s "$(rm -rf /)" `x`'}
    done = subprocess.run(
        [str(runnable), "--print"], env=env, capture_output=True, text=True, check=True
    )
    lines = done.stdout.splitlines()
    assert "s3cret" not in done.stdout
    assert {"env: PATH=/usr/bin:/bin", f"env: LANG={env['LANG']}"} <= set(lines)
    words = [line for line in lines if not line.startswith("env: ")]
    assert words[0] == "--unshare-all"
    assert words[: words.index("--clearenv")].count("--setenv") == 0
    after = words[words.index("--clearenv") + 1 :]
    assert after[:6] == ["--setenv", "LANG", env["LANG"], "--setenv", "PATH", "/usr/bin:/bin"]
    assert after[-2:] == ["/site/claude", "--print"]
    # An unset name is not set (not even empty).
    del env["LANG"]
    done = subprocess.run([str(runnable)], env=env, capture_output=True, text=True, check=True)
    assert "LANG" not in done.stdout.splitlines() and "env: LANG=" not in done.stdout


def test_a_name_a_shell_cannot_expand_is_refused() -> None:
    bad = dataclasses.replace(LAYOUT, pass_env=("PATH", "A;rm -rf /"))

    with pytest.raises(ValueError, match="not a variable name"):
        launcher_script("/bin/bwrap", bad)
