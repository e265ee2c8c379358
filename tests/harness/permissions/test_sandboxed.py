"""What the OS sandbox lets run without asking: what stays inside it, never what leaves."""

from __future__ import annotations

import pytest

from harness.permissions.sandboxed import git_subcommand, leaves_sandbox, within_sandbox

CWD = "/w/t-1"


@pytest.mark.parametrize(
    "command",
    [
        "pytest -q",
        "ruff check . && mypy src",
        "make build 2>&1 | tail -20",
        "git add -A && git commit -m 'fix the parser'",
        "git status; git diff HEAD~1",
        "npm test",
        "rm -r -f build/",
        "python -m pip install -e .",
        "printf 'x = 1\\n' > app.py && echo \"$(date)\" >> log.txt",
    ],
)
def test_building_testing_linting_and_local_git_run_without_asking(command: str) -> None:
    assert within_sandbox("Bash", {"command": command}, cwd=CWD) == "allow"


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("git push origin harness/t-1", "`git push` sends work out of the sandbox"),
        ("git -C . -c core.x=y push", "`git push` sends work out of the sandbox"),
        ("make && env GIT_TRACE=1 git push", "`git push` sends work out of the sandbox"),
        ("/usr/bin/git send-pack x", "`git send-pack` sends work out of the sandbox"),
        ("echo $(git push)", "`git push` sends work out of the sandbox"),
        ("cat <<EOF\ngit push\nEOF", "it holds a here-document, which cannot be read exactly"),
        (
            "ls $'a\\' ; git push'",
            "it holds an ANSI-C quoted string ($'...'), which cannot be read exactly",
        ),
    ],
)
def test_a_push_or_a_line_that_cannot_be_read_exactly_is_asked(command: str, why: str) -> None:
    assert leaves_sandbox(command) == why
    assert within_sandbox("Bash", {"command": command}, cwd=CWD) == "ask"


def test_a_command_asking_to_run_unsandboxed_is_asked() -> None:
    use = {"command": "ls", "dangerouslyDisableSandbox": True}

    assert within_sandbox("Bash", use, cwd=CWD) == "ask"


def test_edits_inside_the_worktree_run_and_outside_it_are_asked() -> None:
    assert within_sandbox("Edit", {"file_path": f"{CWD}/src/app.py"}, cwd=CWD) == "allow"
    assert within_sandbox("Write", {"file_path": "src/new.py"}, cwd=CWD) == "allow"
    assert within_sandbox("Write", {"file_path": "/etc/profile"}, cwd=CWD) == "ask"
    assert within_sandbox("Edit", {"file_path": f"{CWD}/../t-2/app.py"}, cwd=CWD) == "ask"


def test_reads_run_and_the_web_is_still_asked() -> None:
    assert within_sandbox("Read", {"file_path": "/etc/hosts"}, cwd=CWD) == "allow"
    assert within_sandbox("Grep", {"pattern": "x"}, cwd=CWD) == "allow"
    assert within_sandbox("WebFetch", {"url": "https://example.com"}, cwd=CWD) == "ask"


def test_the_git_subcommand_is_read_past_wrappers_and_global_options() -> None:
    assert git_subcommand("git -C repo --no-pager log") == "log"
    assert git_subcommand("GIT_DIR=x timeout 5 git push") == "push"
    assert git_subcommand("ls -la") is None
    assert git_subcommand("git") is None
