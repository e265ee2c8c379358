"""Permission rules in Claude Code's syntax: parsing, matching, deciding, and the text a
question to a human shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.permissions.answers import describe_tool_use, rule_for, rules_for
from harness.permissions.rules import (
    InvalidRuleError,
    PermissionRule,
    by_mode,
    decide,
    parse_rule,
)
from harness.permissions.shell import split_command

CWD = Path("/work/project")


def rules(*texts: str) -> tuple[PermissionRule, ...]:
    return tuple(parse_rule(text) for text in texts)


def decision(
    tool: str, tool_input: dict[str, object], allow: tuple[str, ...], deny: tuple[str, ...] = ()
) -> str:
    return decide(tool, tool_input, allow=rules(*allow), deny=rules(*deny), cwd=CWD).decision


def bash(command: str, allow: tuple[str, ...], deny: tuple[str, ...] = ()) -> str:
    return decision("Bash", {"command": command}, allow, deny)


# --- parse_rule -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tool", "specifier"),
    [
        ("Bash", "Bash", None),
        ("Bash(*)", "Bash", None),
        ("Bash(pytest:*)", "Bash", "pytest:*"),
        ("Bash(npm run test:*)", "Bash", "npm run test:*"),
        ("Bash(ls)", "Bash", "ls"),
        ("Bash(git * main)", "Bash", "git * main"),
        ("  Bash( git diff:* )  ", "Bash", "git diff:*"),
        ("Bash(echo \\(x\\))", "Bash", "echo (x)"),
        ("Edit(src/**)", "Edit", "src/**"),
        ("Write(docs/*.md)", "Write", "docs/*.md"),
        ("Read(**/*.py)", "Read", "**/*.py"),
        ("Read(//etc/**)", "Read", "//etc/**"),
        ("WebFetch(domain:example.com)", "WebFetch", "domain:example.com"),
        ("WebFetch(domain:*.example.com)", "WebFetch", "domain:*.example.com"),
        ("Agent(Explore)", "Agent", "Explore"),
        ("mcp__github__create_issue", "mcp__github__create_issue", None),
        ("mcp__github__*", "mcp__github__*", None),
        ("mcp__github", "mcp__github", None),
    ],
)
def test_parse_rule_reads_tool_and_specifier(text: str, tool: str, specifier: str | None) -> None:
    rule = parse_rule(text)

    assert (rule.tool, rule.specifier, rule.text) == (tool, specifier, text.strip())
    assert str(rule) == text.strip()


@pytest.mark.parametrize(
    ("text", "problem", "fix"),
    [
        ("", "the rule is empty", "`Bash(pytest:*)`"),
        ("Bash(pytest:*", "unbalanced parentheses", "`Bash(pytest:*)`"),
        ("Bash pytest)", "unbalanced parentheses", "`Bash(pytest:*)`"),
        ("Bash(echo ())(", "unbalanced parentheses", "`\\)`"),
        ("(pytest)", "unbalanced parentheses", "`Tool(specifier)`"),
        ("Bash()", "`Bash()` has an empty specifier", "write `Bash` for every use"),
        ("Bash(  )", "empty specifier", "`Bash(pytest:*)`"),
        ("bash(ls)", "'bash' is not a tool name", "did you mean 'Bash'?"),
        ("webfetch", "'webfetch' is not a tool name", "did you mean 'WebFetch'?"),
        ("Bash (ls)", "'Bash ' is not a tool name", "did you mean 'Bash'?"),
        ("mcp__*", "'mcp__*' is not an MCP tool name", "`mcp__github__*`"),
        ("mcp_github", "not an MCP tool name", "`mcp__github__create_issue`"),
        ("mcp__github__list*", "not an MCP tool name", "`mcp__github__*`"),
        ("mcp__github__list(x)", "MCP tool rules take no specifier", "`mcp__github__list`"),
        ("Bash(:*)", "no command before `:*`", "`Bash(pytest:*)`"),
        ("Bash(git diff :*)", "the space before `:*` never matches", "`Bash(git diff:*)`"),
        ("Edit(!src/**)", "negated globs", "`deny:`"),
        ("WebFetch(example.com)", "`domain:<host>`", "`WebFetch(domain:example.com)`"),
        ("WebFetch(domain:*)", "names no domain", "write `WebFetch`"),
        ("WebFetch(domain:exa mple.com)", "`domain:<host>`", "`WebFetch(domain:"),
        ("Glob(src/**)", "Glob rules take no specifier", "write `Glob` alone"),
        ("Bsh(ls)", "Bsh rules take no specifier", "did you mean 'Bash'?"),
    ],
)
def test_parse_rule_rejects_invalid_text_saying_what_and_how(
    text: str, problem: str, fix: str
) -> None:
    with pytest.raises(InvalidRuleError) as caught:
        parse_rule(text)

    assert problem in caught.value.problem
    assert fix in caught.value.fix
    assert isinstance(caught.value, ValueError)
    assert str(caught.value).startswith(f"invalid permission rule {text!r}: ")


# --- Bash: prefix, exact and wildcard rules --------------------------------------------------


@pytest.mark.parametrize(
    ("command", "rule", "expected"),
    [
        ("pytest", "Bash(pytest:*)", "allow"),
        ("pytest -q tests/", "Bash(pytest:*)", "allow"),
        ("  pytest -q  ", "Bash(pytest:*)", "allow"),
        ("pytestx", "Bash(pytest:*)", "ask"),
        ("pytest\t-q", "Bash(pytest:*)", "ask"),
        ("PYTEST -q", "Bash(pytest:*)", "ask"),
        ("npm run test", "Bash(npm run test:*)", "allow"),
        ("npm run test -- -k x", "Bash(npm run test:*)", "allow"),
        ("npm run test:unit", "Bash(npm run test:*)", "ask"),
        ("npm run build", "Bash(npm run test:*)", "ask"),
        ("git diff --stat", "Bash(git diff:*)", "allow"),
        ("git difftool", "Bash(git diff:*)", "ask"),
        ("ls", "Bash(ls)", "allow"),
        ("ls -la", "Bash(ls)", "ask"),
        ("lsof", "Bash(ls:*)", "ask"),
        ("git checkout main", "Bash(git * main)", "allow"),
        ("git main", "Bash(git * main)", "ask"),
        ("ls", "Bash(ls *)", "allow"),
        ("ls -la", "Bash(ls *)", "allow"),
        ("lsof", "Bash(ls *)", "ask"),
        ("lsof", "Bash(ls*)", "allow"),
        ("echo *", "Bash(echo \\*)", "ask"),
        ("anything at all", "Bash", "allow"),
        ("anything at all", "Bash(*)", "allow"),
    ],
)
def test_bash_rules_match_like_claude_code(command: str, rule: str, expected: str) -> None:
    assert bash(command, (rule,)) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("pytest && git diff", "allow"),
        ("pytest; git diff", "allow"),
        ("pytest || git diff", "allow"),
        ("pytest | git diff", "allow"),
        ("pytest\ngit diff", "allow"),
        ("pytest 2>&1 | git diff", "allow"),
        ("pytest >/dev/null 2>&1", "allow"),
        ("pytest && curl example.com", "ask"),
        ("pytest; curl example.com", "ask"),
        ("pytest | sh", "ask"),
        ("pytest & curl example.com", "ask"),
        ("pytest |& curl example.com", "ask"),
        ("pytest\ncurl example.com", "ask"),
        ("pytest $(curl example.com)", "ask"),
        ("pytest `curl example.com`", "ask"),
        ('pytest "$(curl example.com)"', "ask"),
        ("pytest <(curl example.com)", "ask"),
        ("(pytest)", "ask"),
        ("pytest > report.txt", "ask"),
        ("pytest >> report.txt", "ask"),
        ("pytest &> report.txt", "ask"),
        ("pytest >&report.txt", "ask"),
        ("cat <<EOF\nx\nEOF", "ask"),
        ("pytest 'unterminated", "ask"),
        ("", "ask"),
        ("   ", "ask"),
        ("pytest 'a && curl example.com'", "allow"),
        ('pytest -k "a; curl example.com"', "allow"),
        ("pytest '$(curl example.com)'", "allow"),
        ("pytest a\\;b", "allow"),
    ],
)
def test_a_compound_command_is_allowed_only_when_every_part_is(command: str, expected: str) -> None:
    assert bash(command, ("Bash(pytest:*)", "Bash(git diff:*)")) == expected


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf /",
        "rm -rf",
        "pytest && rm -rf /",
        "pytest; rm -rf /",
        "pytest | rm -rf /",
        "pytest & rm -rf /",
        "pytest\nrm -rf /",
        "echo $(rm -rf /)",
        "echo `rm -rf /`",
        'pytest "$(rm -rf /)"',
        'echo "a `rm -rf /` b"',
        'echo "$(ls $(rm -rf /))"',
        "(rm -rf /)",
        "FOO=1 rm -rf /",
        "sudo rm -rf /",
        "timeout 5 rm -rf /",
        "nice -n 10 rm -rf /",
        "env A=b rm -rf /",
        "echo / | xargs rm -rf",
        "/bin/rm -rf /",
        "'rm' -rf /",
        "rm  -rf /",
        "if true; then rm -rf /; fi",
        "for f in a; do rm -rf $f; done",
    ],
)
def test_a_deny_rule_sees_every_part_and_through_wrappers(command: str) -> None:
    assert bash(command, ("Bash",), deny=("Bash(rm -rf:*)",)) == "deny"


@pytest.mark.parametrize(
    "command", ["rm -r -f /", "rm -fr /", "echo 'rm -rf /'", "git rm -rf x", "rmdir x"]
)
def test_a_deny_rule_matches_text_not_the_program(command: str) -> None:
    assert bash(command, ("Bash",), deny=("Bash(rm -rf:*)",)) == "allow"


def test_deny_wins_over_allow() -> None:
    assert bash("git push origin main", ("Bash(git:*)",), deny=("Bash(git push:*)",)) == "deny"
    assert bash("git status", ("Bash(git:*)",), deny=("Bash(git push:*)",)) == "allow"
    assert bash("ls", ("Bash",), deny=("Bash",)) == "deny"


def test_a_use_no_rule_matches_is_asked_with_a_reason() -> None:
    nothing = decide("Bash", {"command": "curl example.com"}, allow=(), deny=(), cwd=CWD)
    partly = decide(
        "Bash", {"command": "pytest && curl x"}, allow=rules("Bash(pytest:*)"), deny=(), cwd=CWD
    )
    substituted = decide(
        "Bash", {"command": "pytest $(x)"}, allow=rules("Bash(pytest:*)"), deny=(), cwd=CWD
    )

    assert (nothing.decision, nothing.rule) == ("ask", None)
    assert partly.reason == "no allow rule covers `curl x`"
    assert substituted.reason == "the command uses command substitution"


def test_the_deciding_rule_is_returned() -> None:
    allow = rules("Bash(ls:*)", "Bash(pytest:*)")
    deny = rules("Bash(git push:*)")

    allowed = decide("Bash", {"command": "pytest -q"}, allow=allow, deny=deny, cwd=CWD)
    denied = decide("Bash", {"command": "git push"}, allow=allow, deny=deny, cwd=CWD)

    assert allowed.rule == parse_rule("Bash(pytest:*)")
    assert denied.rule == parse_rule("Bash(git push:*)")


def test_a_bash_use_without_a_command_string_is_asked() -> None:
    assert decision("Bash", {}, ("Bash(ls:*)",)) == "ask"
    assert decision("Bash", {"command": 3}, ("Bash(ls:*)",)) == "ask"
    assert decision("Bash", {}, ("Bash",)) == "allow"


def test_split_command_keeps_quoted_operators_and_names_what_it_cannot_vouch_for() -> None:
    assert split_command("a && b || c; d | e & f\ng").parts == tuple("abcdefg")
    assert split_command("echo 'a && b' \"c; d\"").parts == ("echo 'a && b' \"c; d\"",)
    assert split_command("a $(b; c) d").parts == ("a", "b", "c", "d")
    assert split_command('a "$(b; c)" d').parts == ('a "$(b; c)" d', "b", "c")
    assert split_command("a $(b)").opaque == "command substitution"
    assert split_command("a > f").opaque == "output redirected to a file"
    assert split_command("a 2>&1 >/dev/null").opaque == ""


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
