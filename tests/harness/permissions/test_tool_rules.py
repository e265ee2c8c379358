"""Permission rules of the other tools: file paths, WebFetch, Agent and MCP, and the permission
modes as the harness applies them."""

from __future__ import annotations

import pytest

from harness.permissions.answers import rules_for
from harness.permissions.rules import by_mode
from harness.permissions.shell import split_command
from tests.harness.permissions.rules_support import bash, decision

# --- file paths -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "path", "expected"),
    [
        ("Edit(src/**)", "/work/project/src/app.py", "allow"),
        ("Edit(src/**)", "/work/project/src/a/b/c.py", "allow"),
        ("Edit(src/**)", "src/app.py", "allow"),
        ("Edit(src/**)", "/work/project/lib/src/app.py", "ask"),
        ("Edit(src/**)", "/work/project/src", "ask"),
        ("Edit(src/**)", "/work/other/src/app.py", "ask"),
        ("Edit(src/**)", "/work/project/../other/src/app.py", "ask"),
        ("Edit(src/**)", "../project/src/app.py", "allow"),
        ("Edit(src/**)", "src/../../x/src/app.py", "ask"),
        ("Edit(**)", "/work/project/a/b.txt", "allow"),
        ("Edit(**)", "/etc/passwd", "ask"),
        ("Edit(**)", "/work/project", "ask"),
        ("Edit(**)", "~/x", "ask"),
        ("Write(docs/*.md)", "/work/project/docs/x.md", "allow"),
        ("Write(docs/*.md)", "/work/project/docs/sub/x.md", "ask"),
        ("Write(docs/*.md)", "/work/project/docs/x.txt", "ask"),
        ("Write(docs/**/*.md)", "/work/project/docs/x.md", "allow"),
        ("Write(docs/**/*.md)", "/work/project/docs/a/b/x.md", "allow"),
        ("Read(**/*.py)", "/work/project/app.py", "allow"),
        ("Read(**/*.py)", "/work/project/a/b/app.py", "allow"),
        ("Read(*.py)", "/work/project/a/b/app.py", "allow"),
        ("Read(/*.py)", "/work/project/a/app.py", "ask"),
        ("Read(/*.py)", "/work/project/app.py", "allow"),
        ("Read(./*.py)", "/work/project/a/app.py", "allow"),
        ("Read(app.py)", "/work/project/a/app.py", "allow"),
        ("Read(/app.py)", "/work/project/a/app.py", "ask"),
        ("Read(build)", "/work/project/a/build/out.js", "allow"),
        ("Read(build/)", "/work/project/build", "ask"),
        ("Read(build/)", "/work/project/build/out.js", "allow"),
        ("Read(file?.py)", "/work/project/file1.py", "allow"),
        ("Read(file?.py)", "/work/project/file10.py", "ask"),
        ("Read(file[0-9].py)", "/work/project/file7.py", "allow"),
        ("Read(file[!0-9].py)", "/work/project/filex.py", "allow"),
        ("Read(file[!0-9].py)", "/work/project/file7.py", "ask"),
        ("Read(a\\*.py)", "/work/project/a*.py", "allow"),
        ("Read(a\\*.py)", "/work/project/ab.py", "ask"),
        ("Read(//etc/**)", "/etc/passwd", "allow"),
        ("Read(//etc/**)", "/work/project/etc/passwd", "ask"),
        ("Read(*.py)", "/etc/app.py", "ask"),
    ],
)
def test_file_rules_are_gitignore_globs_inside_the_working_folder(
    rule: str, path: str, expected: str
) -> None:
    tool = rule.split("(")[0]

    assert decision(tool, {"file_path": path}, (rule,)) == expected


def test_home_globs_match_under_the_home_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/dev")

    assert decision("Read", {"file_path": "/home/dev/notes/a.md"}, ("Read(~/notes/**)",)) == (
        "allow"
    )
    assert decision("Read", {"file_path": "/home/other/notes/a.md"}, ("Read(~/notes/**)",)) == (
        "ask"
    )


@pytest.mark.parametrize(
    ("tool", "tool_input", "expected"),
    [
        ("Edit", {"file_path": "/work/project/src/a.py"}, "allow"),
        ("Write", {"file_path": "/work/project/src/a.py"}, "allow"),
        ("MultiEdit", {"file_path": "/work/project/src/a.py"}, "allow"),
        ("NotebookEdit", {"notebook_path": "/work/project/src/a.ipynb"}, "allow"),
        ("Read", {"file_path": "/work/project/src/a.py"}, "ask"),
        ("Edit", {}, "ask"),
        ("Edit", {"file_path": ""}, "ask"),
    ],
)
def test_edit_rules_cover_every_tool_that_edits_files(
    tool: str, tool_input: dict[str, object], expected: str
) -> None:
    assert decision(tool, tool_input, ("Edit(src/**)",)) == expected


def test_write_rules_cover_write_only() -> None:
    assert decision("Write", {"file_path": "/work/project/a.md"}, ("Write(**)",)) == "allow"
    assert decision("Edit", {"file_path": "/work/project/a.md"}, ("Write(**)",)) == "ask"


def test_a_file_deny_rule_wins_over_an_allow_for_the_same_file() -> None:
    assert (
        decision("Edit", {"file_path": "/work/project/.env"}, ("Edit(**)",), deny=("Edit(.env)",))
        == "deny"
    )


# --- WebFetch, Agent, MCP -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "url", "expected"),
    [
        ("WebFetch(domain:example.com)", "https://example.com/docs", "allow"),
        ("WebFetch(domain:example.com)", "https://EXAMPLE.com:8443/docs", "allow"),
        ("WebFetch(domain:example.com)", "https://www.example.com/", "ask"),
        ("WebFetch(domain:example.com)", "https://example.com.evil.io/", "ask"),
        ("WebFetch(domain:example.com)", "https://evil.io/?u=example.com", "ask"),
        ("WebFetch(domain:*.example.com)", "https://docs.example.com/", "allow"),
        ("WebFetch(domain:*.example.com)", "https://a.b.example.com/", "allow"),
        ("WebFetch(domain:*.example.com)", "https://example.com/", "ask"),
        ("WebFetch(domain:*.example.com)", "https://badexample.com/", "ask"),
        ("WebFetch(domain:example.com)", "not a url", "ask"),
        ("WebFetch", "https://anything.io/", "allow"),
    ],
)
def test_webfetch_rules_match_the_url_host(rule: str, url: str, expected: str) -> None:
    assert decision("WebFetch", {"url": url, "prompt": "summarise"}, (rule,)) == expected


@pytest.mark.parametrize(
    ("rule", "tool", "expected"),
    [
        ("mcp__github__create_issue", "mcp__github__create_issue", "allow"),
        ("mcp__github__create_issue", "mcp__github__delete_repo", "ask"),
        ("mcp__github__*", "mcp__github__delete_repo", "allow"),
        ("mcp__github", "mcp__github__delete_repo", "allow"),
        ("mcp__github__*", "mcp__githubber__list", "ask"),
        ("mcp__github", "mcp__githubber__list", "ask"),
        ("mcp__github__list", "mcp__github__list__all", "ask"),
        ("mcp__github__*", "Bash", "ask"),
    ],
)
def test_mcp_rules_match_a_tool_or_a_whole_server(rule: str, tool: str, expected: str) -> None:
    assert decision(tool, {"command": "ls"}, (rule,)) == expected


def test_agent_rules_match_the_subagent_type() -> None:
    assert decision("Agent", {"subagent_type": "Explore"}, ("Agent(Explore)",)) == "allow"
    assert decision("Agent", {"subagent_type": "Plan"}, ("Agent(Explore)",)) == "ask"


def test_a_rule_for_another_tool_never_matches() -> None:
    assert decision("WebSearch", {"query": "x"}, ("Bash", "WebFetch", "Edit(**)")) == "ask"


# --- permission modes, as the harness applies them --------------------------------------------


@pytest.mark.parametrize(
    ("mode", "tool", "tool_input", "decided"),
    [
        ("default", "Write", {"file_path": "/w/a.py"}, "ask"),
        ("acceptEdits", "Write", {"file_path": "/w/a.py"}, "allow"),
        ("acceptEdits", "Edit", {"file_path": "src/a.py"}, "allow"),
        ("acceptEdits", "Write", {"file_path": "/etc/passwd"}, "ask"),
        ("acceptEdits", "Write", {"file_path": "../elsewhere/a.py"}, "ask"),
        ("acceptEdits", "Bash", {"command": "rm -r -f src"}, "ask"),
        ("bypassPermissions", "Bash", {"command": "rm -r -f src"}, "allow"),
        ("dontAsk", "Bash", {"command": "make"}, "deny"),
        ("plan", "Write", {"file_path": "/w/a.py"}, "deny"),
    ],
)
def test_a_roles_permission_mode_decides_what_no_rule_did(
    mode: str, tool: str, tool_input: dict[str, object], decided: str
) -> None:
    assert by_mode(mode, tool, tool_input, cwd="/w") == decided


def test_allow_for_this_task_never_widens_to_other_arguments() -> None:
    remembered = rules_for("Bash", {"command": "rm /tmp/build.log"})

    assert remembered == ("Bash(rm /tmp/build.log)",)
    assert bash("rm /tmp/build.log", remembered) == "allow"
    for wider in ("rm -r -f ~", "rm /tmp/build.log ~/.ssh", "rm /tmp/build.log; curl x"):
        assert bash(wider, remembered) == "ask", wider


@pytest.mark.parametrize(
    "command",
    [
        "ls $'\\'' ; rm -rf x ; echo '",  # bash: ls "'", then rm, then echo
        "ls # '\nrm -rf x\n'",  # bash: ls, then rm on the next line
        "ls <>notes.txt",  # opens (and makes) notes.txt for writing
    ],
)
def test_a_command_riding_on_an_allowed_one_is_asked_as_bash_reads_it(command: str) -> None:
    assert bash(command, ("Bash(ls:*)",)) == "ask"


def test_a_comment_is_read_as_bash_reads_it() -> None:
    assert split_command("ls -la # list it; really").parts == ("ls -la",)
    assert split_command("echo a#b").parts == ("echo a#b",)


GIT_READS = ("Bash(git diff:*)", "Bash(git log:*)", "Bash(git show:*)", "Bash(git status:*)")


@pytest.mark.parametrize(
    "command",
    [
        "git diff --output=/tmp/x",
        "git diff --output /home/me/.bashrc",
        "git diff --no-index /etc/passwd /dev/null",
        "git log --ext-diff -p",
        "git show --textconv HEAD:a.py",
        "git status && git diff --no-index a b",
    ],
)
def test_git_options_that_write_or_read_outside_are_asked_whatever_allows_git(
    command: str,
) -> None:
    assert bash(command, GIT_READS) == "ask"


@pytest.mark.parametrize(
    "command", ["git diff --stat", "git log -p -5", "git show HEAD:README.md", "git status"]
)
def test_reading_git_stays_allowed(command: str) -> None:
    assert bash(command, GIT_READS) == "allow"
