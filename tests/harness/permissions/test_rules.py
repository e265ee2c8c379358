"""Permission rules in Claude Code's syntax: parsing, and Bash's prefix, exact and wildcard rules
deciding a command."""

from __future__ import annotations

import pytest

from harness.permissions.rules import InvalidRuleError, decide, parse_rule
from harness.permissions.shell import split_command
from tests.harness.permissions.rules_support import CWD, bash, decision, rules

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
