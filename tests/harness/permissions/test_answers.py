"""What a question to a human shows of a tool use, and the rule an answer remembers
(harness.permissions.answers)."""

from __future__ import annotations

import pytest

from harness.permissions.answers import describe_tool_use, rule_for, rules_for
from tests.harness.permissions.rules_support import CWD, bash, decision

# --- describe_tool_use and rule_for ----------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "tool_input", "summary"),
    [
        ("Bash", {"command": "pytest -q", "description": "run tests"}, "Bash: `pytest -q`"),
        ("Bash", {"command": "a\nb"}, "Bash:\n```\na\nb\n```"),
        ("Bash", {"command": "echo `date`"}, "Bash:\n```\necho `date`\n```"),
        ("Edit", {"file_path": "/work/project/src/app.py"}, "Edit src/app.py"),
        ("Edit", {"file_path": "/etc/hosts"}, "Edit /etc/hosts"),
        (
            "Write",
            {"file_path": "/work/project/docs/x.md", "content": "x" * 1234},
            "Write docs/x.md (1,234 chars)",
        ),
        (
            "MultiEdit",
            {"file_path": "/work/project/a.py", "edits": [{}, {}]},
            "Edit a.py (2 edits)",
        ),
        ("NotebookEdit", {"notebook_path": "/work/project/n.ipynb"}, "Edit notebook n.ipynb"),
        ("Read", {"file_path": "/work/project/README.md"}, "Read README.md"),
        ("Grep", {"pattern": "TODO", "path": "/work/project/src"}, "Grep `TODO` in src"),
        ("Glob", {"pattern": "**/*.py"}, "Glob `**/*.py`"),
        (
            "WebFetch",
            {"url": "https://example.com/a", "prompt": "p"},
            "WebFetch https://example.com/a",
        ),
        ("WebSearch", {"query": "pydantic strict"}, "WebSearch: `pydantic strict`"),
        ("Agent", {"subagent_type": "Explore", "prompt": "p"}, "Agent (Explore)"),
        ("mcp__github__list", {"repo": "a/b"}, 'mcp__github__list `{"repo": "a/b"}`'),
        ("mcp__github__list", {}, "mcp__github__list"),
    ],
)
def test_describe_tool_use_gives_a_short_summary(
    tool: str, tool_input: dict[str, object], summary: str
) -> None:
    assert describe_tool_use(tool, tool_input, cwd=CWD) == summary


def test_describe_tool_use_cuts_a_long_command() -> None:
    summary = describe_tool_use("Bash", {"command": "x" * 5000})

    assert summary.startswith("Bash:\n```\nxxx")
    assert summary.endswith("\n... (cut)\n```")
    assert len(summary) < 1600


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("ls -la src", "Bash(ls:*)"),
        ("git status --short", "Bash(git status:*)"),
        ("pwd", "Bash(pwd:*)"),
        # Anything that may write or run code: the exact command, never a prefix.
        ("rm /tmp/build.log", "Bash(rm /tmp/build.log)"),
        ("pytest -q", "Bash(pytest -q)"),
        ("git diff --stat", "Bash(git diff --stat)"),
        ("npm run test -- -k x", "Bash(npm run test -- -k x)"),
        ("python scripts/check.py --fix", "Bash(python scripts/check.py --fix)"),
        ("python -c 'print(1)'", "Bash(python -c 'print\\(1\\)')"),
        ("node", "Bash(node)"),
        ("git -C sub diff", "Bash(git -C sub diff)"),
        ("sudo apt-get install x", "Bash(sudo apt-get install x)"),
        ("CI=1 npm test", "Bash(CI=1 npm test)"),
        ("ls && curl example.com", "Bash(ls:*)"),
    ],
)
def test_rule_for_a_command_is_it_exactly_or_a_prefix_of_a_program_that_only_reads(
    command: str, rule: str
) -> None:
    assert rule_for("Bash", {"command": command}) == rule


@pytest.mark.parametrize(
    "command",
    ["pytest -q", "npm run test -- -k x", "python -c 'print(1)'", "CI=1 npm test", "git -C a log"],
)
def test_the_rule_for_a_command_allows_that_command(command: str) -> None:
    remembered = rule_for("Bash", {"command": command})

    assert bash(command, (remembered,)) == "allow"


def test_a_remembered_exact_command_with_a_star_is_asked_again_not_widened() -> None:
    remembered = rule_for("Bash", {"command": "bash -c 'rm *'"})

    assert remembered == "Bash(bash -c 'rm \\*')"
    assert bash("bash -c 'rm *'", (remembered,)) == "ask"
    assert bash("bash -c 'rm -rf /'", (remembered,)) == "ask"


@pytest.mark.parametrize("tool_input", [{}, {"command": ""}, {"command": " ; "}])
def test_rule_for_a_bash_use_without_a_command_refuses_rather_than_allow_all(
    tool_input: dict[str, object],
) -> None:
    with pytest.raises(ValueError, match="without a command"):
        rule_for("Bash", tool_input)


def test_rule_for_a_relative_path_without_a_folder_keeps_it_relative() -> None:
    assert rule_for("Edit", {"file_path": "src/app.py"}) == "Edit(src/app.py)"
    assert rule_for("Edit", {"file_path": "/srv/app.py"}) == "Edit(//srv/app.py)"


def test_rules_for_gives_one_rule_per_part_of_a_compound_command() -> None:
    command = {"command": "pytest -q && git status && pytest -q"}

    assert rules_for("Bash", command) == ("Bash(pytest -q)", "Bash(git status:*)")
    assert bash(command["command"], rules_for("Bash", command)) == "allow"


@pytest.mark.parametrize(
    ("tool", "tool_input", "rule"),
    [
        ("Edit", {"file_path": "/work/project/src/app.py"}, "Edit(src/app.py)"),
        ("Edit", {"file_path": "/work/project/app.py"}, "Edit(/app.py)"),
        ("Write", {"file_path": "/work/project/docs/x.md"}, "Write(docs/x.md)"),
        ("MultiEdit", {"file_path": "/work/project/a.py"}, "Edit(/a.py)"),
        ("Read", {"file_path": "/etc/hosts"}, "Read(//etc/hosts)"),
        ("Edit", {"file_path": "/work/project/a[1]*(x).py"}, "Edit(/a\\[1\\]\\*\\(x\\).py)"),
        ("NotebookEdit", {"notebook_path": "/work/project/n.ipynb"}, "NotebookEdit(/n.ipynb)"),
        ("WebFetch", {"url": "https://Docs.Example.com/x"}, "WebFetch(domain:docs.example.com)"),
        ("WebFetch", {"url": "nonsense"}, "WebFetch"),
        ("Agent", {"subagent_type": "general-purpose"}, "Agent(general-purpose)"),
        ("mcp__github__list", {"repo": "a/b"}, "mcp__github__list"),
        ("WebSearch", {"query": "x"}, "WebSearch"),
    ],
)
def test_rule_for_other_tools_names_the_exact_file_or_domain(
    tool: str, tool_input: dict[str, object], rule: str
) -> None:
    remembered = rule_for(tool, tool_input, cwd=CWD)

    assert remembered == rule
    assert decision(tool, tool_input, (remembered,)) == "allow"


def test_the_rule_for_a_file_does_not_cover_its_namesakes_elsewhere() -> None:
    remembered = rule_for("Edit", {"file_path": "/work/project/app.py"}, cwd=CWD)

    assert decision("Edit", {"file_path": "/work/project/sub/app.py"}, (remembered,)) == "ask"
