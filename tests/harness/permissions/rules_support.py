"""What the permission rules' tests share: rules parsed from their text, and the decision on a
tool use under them."""

from __future__ import annotations

from pathlib import Path

from harness.permissions.rules import PermissionRule, decide, parse_rule

CWD = Path("/work/project")


def rules(*texts: str) -> tuple[PermissionRule, ...]:
    return tuple(parse_rule(text) for text in texts)


def decision(
    tool: str, tool_input: dict[str, object], allow: tuple[str, ...], deny: tuple[str, ...] = ()
) -> str:
    return decide(tool, tool_input, allow=rules(*allow), deny=rules(*deny), cwd=CWD).decision


def bash(command: str, allow: tuple[str, ...], deny: tuple[str, ...] = ()) -> str:
    return decision("Bash", {"command": command}, allow, deny)
