"""Permission rules: which tool uses an agent may make without asking a human.

A role's ``allow:`` and ``deny:`` hold rules in Claude Code's permission-rule syntax, so they
read like a ``.claude/settings.json``. :func:`decide` applies them: a matching deny rule denies
(deny wins over allow), else allow rules that cover the use allow it, else it is asked of a
human. Pure: no I/O; callers pass the agent's working folder (absolute).

What a rule matches (as Claude Code does, unless marked "here"):
- ``Tool`` (or ``Tool(*)``) matches every use of the tool. ``Edit`` rules also cover MultiEdit,
  Write and NotebookEdit, the other tools that edit files; ``Write`` rules cover Write only.
- ``Bash(cmd:*)``: the command is ``cmd`` or starts with ``cmd `` (a space, so ``Bash(ls:*)``
  misses ``lsof``). ``Bash(cmd)``: exactly that command. ``Bash(git * main)``: ``*`` is any
  text; a single trailing `` *`` is optional. Case-sensitive; the command is trimmed first.
- A Bash command line is split into simple commands at ``&&``, ``||``, ``;``, ``|``, ``&``
  and newlines outside quotes (:func:`harness.permissions.shell.split_command`). Allow rules
  allow it only when each part is matched by some allow rule, and (here) never when it holds
  ``$(...)``, backticks, ``<(...)``, a subshell, a here-document, an unterminated quote or
  output redirected to a file other than ``/dev/null``: those are asked.
- A deny rule denies when any part matches, the commands inside ``$(...)``, backticks and
  subshells included (here: also inside double quotes), and (here) when a part matches once
  quotes, ``VAR=value`` words and wrappers (``sudo``, ``env``, ``timeout 5``, ``xargs``,
  ``then``, ...) are dropped and ``/bin/rm`` read as ``rm``. Deny rules match text, not
  programs (``rm -r -f`` is not ``rm -rf``): a deny list is a net, not a boundary.
- ``Read(glob)``, ``Edit(glob)``, ``Write(glob)``, ``NotebookEdit(glob)``: gitignore-style
  globs on the tool's file path, relative to the working folder: ``*`` and ``?`` stay within
  a folder, ``**`` spans folders, ``[a-z]`` is a class, ``\\`` escapes; a glob without a
  slash (``*.py``) matches at any depth, one with a slash (``docs/*.md``, ``/app.py``) from
  the working folder; a path also matches when a parent folder of it does. A path outside
  the folder (absolute, or leaving it by ``..``) never matches a relative glob; ``//abs/**``
  and ``~/dir/**`` are absolute globs. Paths are compared as written: symlinks not resolved.
- ``WebFetch(domain:example.com)``: the URL's host is example.com; ``domain:*.example.com``:
  any subdomain of it (here: not example.com itself).
- ``Agent(Explore)``: that subagent type. ``mcp__server`` and ``mcp__server__*``: every tool
  of the MCP server; ``mcp__server__tool``: that tool.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Literal
from urllib.parse import urlsplit

from harness.permissions.shell import command_matches, program_forms, split_command
from harness.problems import did_you_mean

Decision = Literal["allow", "deny", "ask"]


@dataclass(frozen=True)
class PermissionRule:
    tool: str  # "Bash", "Edit", "mcp__github__*"
    specifier: str | None  # "pytest:*", "src/**", "domain:example.com"; None: every use
    text: str  # the rule as written (trimmed), e.g. "Bash(pytest:*)"

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class RuleDecision:
    decision: Decision
    rule: PermissionRule | None = None  # the rule that decided; None when asked
    reason: str = ""  # why it is asked, for the question put to a human


class InvalidRuleError(ValueError):
    """A rule that cannot be parsed: ``problem`` says what is wrong, ``fix`` shows a valid one."""

    def __init__(self, text: str, problem: str, fix: str) -> None:
        super().__init__(f"invalid permission rule {text!r}: {problem}; {fix}")
        self.problem = problem
        self.fix = fix


# Tools whose rules take a file-path glob, and the input field holding the path.
PATH_FIELDS = {
    "Read": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "Write": "file_path",
    "NotebookEdit": "notebook_path",
}
_EDIT_TOOLS = ("Edit", "MultiEdit", "Write", "NotebookEdit")
_SPECIFIED = ("Bash", "Read", "Edit", "Write", "NotebookEdit", "WebFetch", "Agent")
_KNOWN = (*_SPECIFIED, "Glob", "Grep", "WebSearch")
_TOOL = re.compile(r"[A-Z][A-Za-z0-9]*")
_MCP = re.compile(r"mcp__[A-Za-z0-9_-]+(__\*)?")
HOST = re.compile(r"(\*\.)?[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*")
_EXAMPLE = "e.g. `Bash(pytest:*)`, `Edit(src/**)` or `WebFetch(domain:example.com)`"


def parse_rule(text: str) -> PermissionRule:
    """One rule, checked; raises :class:`InvalidRuleError` saying what is wrong."""
    rule = text.strip()
    if not rule:
        raise InvalidRuleError(text, "the rule is empty", f"write a tool name, {_EXAMPLE}")
    tool, spec = rule, None
    if "(" in rule or ")" in rule:
        opened = rule.find("(")
        inner = rule[opened + 1 : -1]
        if opened <= 0 or not rule.endswith(")") or not _balanced(inner):
            raise InvalidRuleError(
                text,
                "unbalanced parentheses",
                "write `Tool(specifier)` with the one closing `)` at the end (escape a literal "
                f"one as `\\)`), {_EXAMPLE}",
            )
        tool, spec = rule[:opened], inner.replace("\\(", "(").replace("\\)", ")").strip()
        if not spec:
            raise InvalidRuleError(
                text,
                f"`{tool}()` has an empty specifier",
                f"write `{tool}` for every use of the tool, or say what to match, {_EXAMPLE}",
            )
    if _MCP.fullmatch(tool):
        if spec is not None:
            raise InvalidRuleError(text, "MCP tool rules take no specifier", f"write `{tool}`")
    elif tool.lower().startswith("mcp_"):
        raise InvalidRuleError(
            text,
            f"{tool!r} is not an MCP tool name: they read `mcp__<server>`, `mcp__<server>__*` "
            "or `mcp__<server>__<tool>`",
            "e.g. `mcp__github__*` or `mcp__github__create_issue`",
        )
    elif not _TOOL.fullmatch(tool):
        raise InvalidRuleError(
            text,
            f"{tool!r} is not a tool name: write it as Claude Code spells it, starting with a "
            "capital letter, or as `mcp__<server>__<tool>`",
            f"{did_you_mean(tool, _KNOWN)}{_EXAMPLE}",
        )
    if spec is None or spec == "*":
        return PermissionRule(tool, None, rule)
    return PermissionRule(tool, _checked(text, tool, spec), rule)


def _balanced(text: str) -> bool:
    depth = 0
    for index, char in enumerate(text):
        if not (index and text[index - 1] == "\\"):
            depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


def _checked(text: str, tool: str, spec: str) -> str:
    if tool == "Bash":
        if spec.endswith(":*") and not spec[:-2].strip():
            raise InvalidRuleError(text, "no command before `:*`", "e.g. `Bash(pytest:*)`")
        if spec.endswith(" :*"):
            raise InvalidRuleError(
                text, "the space before `:*` never matches", "drop it, e.g. `Bash(git diff:*)`"
            )
    elif tool in PATH_FIELDS:
        if spec.startswith("!"):
            raise InvalidRuleError(
                text,
                "negated globs (`!`) are not supported",
                f"put the exception in `deny:` instead, e.g. `{tool}(secrets/**)`",
            )
    elif tool == "WebFetch":
        host = spec.removeprefix("domain:")
        if host == "*":
            raise InvalidRuleError(
                text, "`domain:*` names no domain", "write `WebFetch` to cover every domain"
            )
        if not spec.startswith("domain:") or not HOST.fullmatch(host):
            raise InvalidRuleError(
                text,
                "WebFetch rules name a host as `domain:<host>`",
                "e.g. `WebFetch(domain:example.com)` or `WebFetch(domain:*.example.com)`",
            )
    elif tool != "Agent":
        hint = did_you_mean(tool, _SPECIFIED)
        raise InvalidRuleError(
            text,
            f"{tool} rules take no specifier (only {', '.join(_SPECIFIED)} rules do)",
            f"{hint}fix the tool name" if hint else f"write `{tool}` alone",
        )
    return spec


# --- deciding -------------------------------------------------------------------------------


def decide(
    tool_name: str,
    tool_input: Mapping[str, object],
    *,
    allow: Sequence[PermissionRule],
    deny: Sequence[PermissionRule],
    cwd: Path | str,
) -> RuleDecision:
    """Deny if a deny rule matches, else allow if allow rules cover the use, else ask."""
    command = tool_input.get("command") if tool_name == "Bash" else None
    line = split_command(command) if isinstance(command, str) else None
    for rule in deny:
        if not _covers(rule.tool, tool_name):
            continue
        if rule.specifier is None:
            return RuleDecision("deny", rule)
        if line is not None:
            spec = rule.specifier
            forms = (form for part in line.parts for form in program_forms(part))
            if any(command_matches(spec, form) for form in forms):
                return RuleDecision("deny", rule)
        elif _matches(rule, tool_name, tool_input, cwd):
            return RuleDecision("deny", rule)
    for rule in allow:
        if _covers(rule.tool, tool_name) and (
            rule.specifier is None or (line is None and _matches(rule, tool_name, tool_input, cwd))
        ):
            return RuleDecision("allow", rule)
    if line is None:
        return RuleDecision("ask", reason=f"no allow rule covers this {tool_name} use")
    if line.opaque:
        return RuleDecision("ask", reason=f"the command uses {line.opaque}")
    if not line.parts:
        return RuleDecision("ask", reason="the command is empty")
    deciding: list[PermissionRule] = []
    for part in line.parts:
        writes = _git_writes(part)
        if writes:
            return RuleDecision("ask", reason=f"`{part}` {writes}")
        found = next((r for r in allow if _allows_part(r, part)), None)
        if found is None:
            return RuleDecision("ask", reason=f"no allow rule covers `{part}`")
        deciding.append(found)
    return RuleDecision("allow", deciding[0])


# git options that turn a reading subcommand into one that writes a file, reads outside the
# repository or runs a program: no allow rule (`Bash(git diff:*)`) covers a command with one.
_GIT_OUTSIDE = re.compile(
    r"(?:^|\s)(--output(?:=|\s|$)|-o\S*|--no-index\b|--exec-path\b|--ext-diff\b|"
    r"--textconv\b|-c\s|--config-env\b|--upload-pack\b|--receive-pack\b)"
)


def _git_writes(part: str) -> str | None:
    """Why a git command may write or reach outside (then it is asked, whatever allows it)."""
    words = part.split()
    if not words or os.path.basename(words[0]) != "git":
        return None
    found = _GIT_OUTSIDE.search(part)
    return f"uses git's {found.group(1).strip()}, which is not read-only" if found else None


def _allows_part(rule: PermissionRule, part: str) -> bool:
    return (
        rule.tool == "Bash" and rule.specifier is not None and command_matches(rule.specifier, part)
    )


def _covers(rule_tool: str, tool_name: str) -> bool:
    if rule_tool == tool_name or (rule_tool == "Edit" and tool_name in _EDIT_TOOLS):
        return True
    # `mcp__server` and `mcp__server__*` cover the server's tools; `mcp__a__b` is one tool.
    server = rule_tool.removesuffix("__*")
    return (
        server.count("__") == 1
        and server.startswith("mcp__")
        and (tool_name.startswith(server + "__"))
    )


def _matches(
    rule: PermissionRule, tool: str, tool_input: Mapping[str, object], cwd: Path | str
) -> bool:
    spec = rule.specifier or ""
    if rule.tool in PATH_FIELDS:
        path = tool_input.get(PATH_FIELDS.get(tool, ""))
        return isinstance(path, str) and bool(path) and _path_matches(spec, path, cwd)
    if rule.tool == "WebFetch":
        url = tool_input.get("url")
        host = (urlsplit(url).hostname or "") if isinstance(url, str) else ""
        pattern = spec.removeprefix("domain:").lower()
        if pattern.startswith("*."):
            return host.endswith(pattern[1:])
        return bool(host) and host == pattern
    return rule.tool == "Agent" and tool_input.get("subagent_type") == spec


# --- file paths -----------------------------------------------------------------------------


def inside(path: str, folder: Path | str) -> str | None:
    """``path`` relative to ``folder``, or None when outside it (or the folder itself)."""
    base = PurePosixPath(os.path.normpath(folder))
    target = PurePosixPath(os.path.normpath(base / os.path.expanduser(path)))
    try:
        relative = target.relative_to(base).as_posix()
    except ValueError:
        return None
    return None if relative == "." else relative


def _path_matches(spec: str, path: str, cwd: Path | str) -> bool:
    if spec.startswith(("//", "~/")):
        folder = "/" if spec.startswith("//") else os.path.expanduser("~")
        absolute = os.path.normpath(os.path.join(cwd, os.path.expanduser(path)))
        relative, pattern, anchored = inside(absolute, folder), spec[2:], True
    else:
        relative, pattern = inside(path, cwd), spec.removeprefix("./")
        anchored = "/" in pattern.rstrip("/")
    if relative is None:
        return False
    regex = _glob(pattern.strip("/"), anchored)
    folders = relative.split("/")
    candidates = ["/".join(folders[:end]) for end in range(1, len(folders))]
    if not pattern.endswith("/"):  # a trailing slash matches folders only
        candidates.append(relative)
    return any(regex.fullmatch(candidate) for candidate in candidates)


@lru_cache(maxsize=256)
def _glob(pattern: str, anchored: bool) -> re.Pattern[str]:
    """gitignore's glob: ``**/`` any folders, ``/**`` all inside, ``*`` within one folder."""
    out = [] if anchored else ["(?:.*/)?"]
    index = 0
    while index < len(pattern):
        char, at_start = pattern[index], index == 0 or pattern[index - 1] == "/"
        if pattern.startswith("**/", index) and at_start:
            out.append("(?:.*/)?")
            index += 3
            continue
        if pattern.startswith("**", index) and index + 2 == len(pattern) and at_start:
            out.append(".*")
            break
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "\\" and index + 1 < len(pattern):
            index += 1
            out.append(re.escape(pattern[index]))
        elif char == "[" and "]" in pattern[index + 2 :]:
            end = pattern.index("]", index + 2)
            body = pattern[index + 1 : end].replace("\\", "\\\\")
            out.append("(?!/)[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            index = end
        else:
            out.append(re.escape(char))
        index += 1
    return re.compile("".join(out), re.DOTALL)


# --- permission modes ---------------------------------------------------------------------


def by_mode(
    mode: str, tool_name: str, tool_input: Mapping[str, object], *, cwd: Path | str
) -> Decision:
    """What a role's ``permissionMode`` decides for a use no rule decided: the harness applies
    it, so the CLI never decides alone (it always runs in its default mode). ``acceptEdits``
    allows edits of files inside ``cwd``; ``bypassPermissions`` allows every use; ``dontAsk``
    and ``plan`` deny what they would otherwise ask; ``default`` asks."""
    if mode == "bypassPermissions":
        return "allow"
    if mode in ("dontAsk", "plan"):
        return "deny"
    if mode == "acceptEdits" and tool_name in _EDIT_TOOLS:
        path = tool_input.get(PATH_FIELDS.get(tool_name, ""))
        if isinstance(path, str) and path and inside(path, cwd) is not None:
            return "allow"
    return "ask"
