"""Tool uses in the words of a question to a human, and the rules an answer remembers: what
``Allow for this task`` grants (the narrowest rule that covers the use). Pure."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from harness.permissions.rules import HOST, PATH_FIELDS, inside
from harness.permissions.shell import program_prefix, split_command


def describe_tool_use(
    tool_name: str, tool_input: Mapping[str, object], *, cwd: Path | str | None = None
) -> str:
    """A short summary of a tool use for a question to a human: "Bash: `pytest -q`",
    "Edit src/app.py", "Write docs/x.md (1,234 chars)"; paths relative to ``cwd`` inside it."""
    text = {key: value for key, value in tool_input.items() if isinstance(value, str)}
    if tool_name == "Bash":
        return f"Bash:{_code(text.get('command', ''))}"
    path = text.get(PATH_FIELDS.get(tool_name, ""))
    if path:
        shown = (inside(path, cwd) if cwd is not None else None) or path
        edits = tool_input.get("edits")
        if tool_name == "Write":
            return f"Write {shown} ({len(text.get('content', '')):,} chars)"
        if tool_name == "MultiEdit" and isinstance(edits, list):
            return f"Edit {shown} ({len(edits)} edits)"
        return f"{'Edit notebook' if tool_name == 'NotebookEdit' else tool_name} {shown}"
    if "pattern" in text:  # Glob, Grep
        folder = text.get("path")
        where = f" in {(inside(folder, cwd) if cwd else None) or folder}" if folder else ""
        return f"{tool_name}{_code(text['pattern'])}{where}"
    if "url" in text:
        return f"{tool_name} {text['url']}"
    if "query" in text:
        return f"{tool_name}:{_code(text['query'])}"
    if "subagent_type" in text:
        return f"{tool_name} ({text['subagent_type']})"
    shown = json.dumps(dict(tool_input), default=str, ensure_ascii=False)
    return f"{tool_name}{_code(shown)}" if tool_input else tool_name


def _code(text: str) -> str:
    """`` `text` `` after a space for one short line, else a code block on the next line (cut
    after 1,500 characters), so a label reads "Bash: `ls`" or "Bash:" above the block."""
    if "\n" not in text and "`" not in text and len(text) <= 200:
        return f" `{text}`"
    cut = text if len(text) <= 1500 else text[:1500] + "\n... (cut)"
    return "\n```\n" + cut.replace("```", "`\u200b``") + "\n```"


def rule_for(
    tool_name: str, tool_input: Mapping[str, object], *, cwd: Path | str | None = None
) -> str:
    """The narrowest sensible rule to remember an "allow for this task" answer by.

    Bash: the exact command (``Bash(rm /tmp/build.log)``), or a prefix rule for a program
    that only reads (``Bash(ls:*)``, ``Bash(git status:*)``). A compound command gives its
    first part's rule (:func:`rules_for` gives each part's). File tools: the exact file, relative
    to ``cwd`` when inside it, else absolute (``//abs/path``). WebFetch: the URL's host.
    Else the bare tool name. A Bash use without a command (which Claude Code does not send)
    raises ValueError rather than give ``Bash``, which would allow every command.
    """
    text = {key: value for key, value in tool_input.items() if isinstance(value, str)}
    if tool_name == "Bash":
        return rules_for(tool_name, tool_input)[0]
    path = text.get(PATH_FIELDS.get(tool_name, ""))
    if path:
        relative = inside(path, cwd if cwd is not None else "/")
        if relative is None or (cwd is None and os.path.isabs(os.path.expanduser(path))):
            shown = "/" + os.path.normpath(os.path.join(cwd or "/", os.path.expanduser(path)))
        else:  # a glob without a slash would match at any depth: anchor it
            shown = relative if "/" in relative else "/" + relative
        escaped = re.sub(r"([*?\[\]\\()]|^!)", r"\\\1", shown)
        return f"{'Edit' if tool_name == 'MultiEdit' else tool_name}({escaped})"
    host = urlsplit(text.get("url", "")).hostname or ""
    if tool_name == "WebFetch" and HOST.fullmatch(host):
        return f"WebFetch(domain:{host})"
    if tool_name == "Agent" and re.fullmatch(r"[\w.-]+", text.get("subagent_type", "")):
        return f"Agent({text['subagent_type']})"
    return tool_name


def rules_for(
    tool_name: str, tool_input: Mapping[str, object], *, cwd: Path | str | None = None
) -> tuple[str, ...]:
    """:func:`rule_for` for each simple command of a Bash command line, without repeats."""
    command = tool_input.get("command")
    parts = split_command(command).parts if isinstance(command, str) else ()
    if tool_name == "Bash":
        if not parts:
            raise ValueError("a Bash use without a command has no rule to remember it by")
        return tuple(dict.fromkeys(_bash_rule(part) for part in parts))
    return (rule_for(tool_name, tool_input, cwd=cwd),)


# Programs an "Allow for this task" may remember as a prefix: they read and never write nor run
# code, whatever their arguments (a redirection is asked anyway). Anything else is remembered
# as the exact command: allowing `rm /tmp/build.log` must not allow `rm -r -f ~`.
READ_ONLY_PREFIXES = frozenset({"ls", "pwd", "git status"})


def _bash_rule(part: str) -> str:
    prefix = program_prefix(part)
    if prefix in READ_ONLY_PREFIXES:
        return f"Bash({prefix}:*)"
    # The exact command. A literal `*` in it is escaped, so the rule never matches and the
    # command is asked again rather than remembered as a wildcard that would widen it.
    return "Bash(" + re.sub(r"([()*])", r"\\\1", part) + ")"
