"""What runs without asking when the agent is inside the OS sandbox. Pure.

The sandbox is the boundary: inside it an agent sees its own worktree writable, the system
read-only and no network but the model and the allowed hosts, so building, testing, linting,
reading and using git on its own branch need nobody's approval. What would leave it is asked:
a push, a write outside the worktree, a command asking to run unsandboxed, and any command
line the shell reading cannot read exactly (a push could hide in it).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path

from harness.permissions.rules import PATH_FIELDS, Decision, inside
from harness.permissions.shell import program_forms, split_command

_READS = frozenset({"Read", "Glob", "Grep", "LS"})
_EDITS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})
# git's options that take a value as the next word, before the subcommand.
_GIT_VALUED = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env"})
# What hides commands from the shell reading; redirections and substitutions do not (the
# commands inside a substitution are read as parts of their own).
_HIDING = ("an ANSI-C quoted string ($'...')", "an unterminated quote", "a here-document")
# Subcommands that send the repository's work to another machine.
_SENDS = frozenset({"push", "send-pack", "send-email", "request-pull"})


def within_sandbox(
    tool_name: str, tool_input: Mapping[str, object], *, cwd: Path | str
) -> Decision:
    """ "allow" for a use that stays inside the sandbox, else "ask"."""
    if tool_name in _READS:
        return "allow"
    if tool_name in _EDITS:
        path = tool_input.get(PATH_FIELDS.get(tool_name, ""))
        ok = isinstance(path, str) and bool(path) and inside(path, cwd) is not None
        return "allow" if ok else "ask"
    if tool_name == "Bash":
        command = tool_input.get("command")
        if not isinstance(command, str) or tool_input.get("dangerouslyDisableSandbox"):
            return "ask"
        return "ask" if leaves_sandbox(command) else "allow"
    return "ask"


def leaves_sandbox(command: str) -> str | None:
    """Why a command line would leave the sandbox (then a human decides), or None."""
    line = split_command(command)
    hiding = [reason for reason in line.reasons if reason in _HIDING]
    if hiding:
        return f"it holds {hiding[0]}, which cannot be read exactly"
    for part in line.parts:
        sub = git_subcommand(part)
        if sub in _SENDS:
            return f"`git {sub}` sends work out of the sandbox"
    return None


def git_subcommand(part: str) -> str | None:
    """The subcommand of a simple command that runs git (wrappers and ``VAR=`` words
    dropped, global options skipped); None when it does not run git."""
    words: list[str] = []
    for form in program_forms(part):
        try:
            candidate = shlex.split(form)
        except ValueError:
            candidate = form.split()
        if candidate and os.path.basename(candidate[0]) == "git":
            words = candidate
            break
    if not words:
        return None
    index = 1
    while index < len(words) and words[index].startswith("-"):
        index += 2 if words[index] in _GIT_VALUED else 1
    return words[index] if index < len(words) else None
