"""Roles: ``roles/*.md`` files with YAML front matter; the body is the role prompt.

Only this module parses role files. ``parse_role`` is pure; ``load_roles`` reads a folder.
"""

from __future__ import annotations

import difflib
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast, get_args

import yaml

from harness.errors import RoleError

logger = logging.getLogger(__name__)

PermissionMode = Literal["default", "acceptEdits", "bypassPermissions", "plan", "dontAsk"]
PERMISSION_MODES: tuple[str, ...] = get_args(PermissionMode)


@dataclass(frozen=True)
class Role:
    name: str
    display_name: str
    category: str
    prompt: str
    source: str
    cwd: Path | None = None
    model: str | None = None
    # Built-in Claude Code tools the role may use; None means Claude Code's default set.
    tools: tuple[str, ...] | None = None
    permission_mode: PermissionMode = "default"
    max_turns: int | None = None
    max_budget_usd: float | None = None


KNOWN_FIELDS: tuple[str, ...] = (
    "name",
    "displayName",
    "category",
    "cwd",
    "model",
    "tools",
    "permissionMode",
    "maxTurns",
    "maxBudgetUsd",
)
# Role names appear in routing rules, MCP tool input and Slack text: keep them plain.
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
# Built-in Claude Code tools are PascalCase (Read, Bash, WebFetch); this catches `read` typos
# without pinning a list that changes with every CLI release.
_TOOL_RE = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_FENCE = "---"
_EXAMPLE = "---\nname: developer\ncategory: worker\n---\nYou are a developer..."


def _split_front_matter(text: str, source: str) -> tuple[str, str]:
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != _FENCE:
        raise RoleError(
            source,
            "(front matter)",
            "the file does not start with a `---` line",
            fix=f"start the file with YAML front matter between `---` lines, e.g.\n{_EXAMPLE}",
        )
    for index in range(1, len(lines)):
        if lines[index].strip() == _FENCE:
            return "\n".join(lines[1:index]), "\n".join(lines[index + 1 :])
    raise RoleError(
        source,
        "(front matter)",
        "the front matter is not closed by a second `---` line",
        fix="add a line `---` after the last front-matter field, before the prompt",
    )


def _describe(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return type(value).__name__


def _text(meta: Mapping[str, object], key: str, source: str, example: str) -> str | None:
    if key not in meta:
        return None
    value = meta[key]
    if not isinstance(value, str) or not value.strip():
        raise RoleError(
            source,
            key,
            f"expected a non-empty string, found {_describe(value)}",
            fix=f"write e.g. `{key}: {example}`",
        )
    return value.strip()


def _positive(meta: Mapping[str, object], key: str, source: str, *, integer: bool) -> float | None:
    if key not in meta or meta[key] is None:
        return None
    value = meta[key]
    kinds = int if integer else int | float
    if isinstance(value, bool) or not isinstance(value, kinds) or value <= 0:
        wanted = "a whole number" if integer else "a number"
        raise RoleError(
            source,
            key,
            f"expected {wanted} greater than 0, found {_describe(value)}",
            fix=f"write e.g. `{key}: {20 if integer else 2.5}`, or remove the line for no limit",
        )
    return float(value)


def _tools(meta: Mapping[str, object], source: str) -> tuple[str, ...] | None:
    if "tools" not in meta or meta["tools"] is None:
        return None
    value = meta["tools"]
    if not isinstance(value, list):
        raise RoleError(
            source,
            "tools",
            f"expected a list of tool names, found {_describe(value)}",
            fix="write e.g. `tools: [Read, Glob, Grep]`, or remove it for the default tool set",
        )
    names: list[str] = []
    for index, item in enumerate(value):
        if not isinstance(item, str) or not _TOOL_RE.match(item):
            hint = (
                " MCP tools are granted by category through `mcp` in config.yaml, not here."
                if isinstance(item, str) and item.startswith("mcp__")
                else ""
            )
            raise RoleError(
                source,
                f"tools[{index}]",
                f"{_describe(item)} is not a built-in Claude Code tool name.{hint}",
                fix="use built-in tool names as spelled by Claude Code, e.g. "
                "Read, Write, Edit, Bash, Glob, Grep, WebFetch",
            )
        if item in names:
            raise RoleError(
                source, f"tools[{index}]", f"{item!r} is listed twice", fix="remove the duplicate"
            )
        names.append(item)
    return tuple(names)


def parse_role(text: str, *, source: str, base_dir: Path) -> Role:
    """Parse one role file. ``base_dir`` (the config file's folder) anchors a relative cwd."""
    front, body = _split_front_matter(text, source)
    try:
        loaded = yaml.safe_load(front) if front.strip() else {}
    except yaml.YAMLError as exc:
        raise RoleError(
            source,
            "(front matter)",
            f"YAML syntax error: {exc}",
            fix="fix the front matter at the line shown (`key: value` lines)",
        ) from exc
    if not isinstance(loaded, Mapping):
        raise RoleError(
            source,
            "(front matter)",
            f"expected `key: value` lines, found {_describe(loaded)}",
            fix=f"write the front matter as a YAML mapping, e.g.\n{_EXAMPLE}",
        )
    meta = cast(Mapping[str, object], loaded)
    for key in meta:
        if key not in KNOWN_FIELDS:
            close = difflib.get_close_matches(str(key), KNOWN_FIELDS, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise RoleError(
                source,
                str(key),
                f"unknown field {key!r}",
                fix=f"{hint}known fields: {', '.join(KNOWN_FIELDS)}",
            )

    name = _text(meta, "name", source, "developer")
    if name is None or not _NAME_RE.match(name):
        raise RoleError(
            source,
            "name",
            "missing" if name is None else f"{name!r} is not a valid role name",
            fix="set `name:` to lowercase letters, digits, `-` or `_` matching the file name, "
            "e.g. `name: developer` in developer.md",
        )
    category = _text(meta, "category", source, "worker")
    if category is None:
        raise RoleError(
            source,
            "category",
            "missing",
            fix="add e.g. `category: worker` (or `conversational` for coordinator roles "
            "that may draft other agents)",
        )
    mode = _text(meta, "permissionMode", source, "acceptEdits") or "default"
    if mode not in PERMISSION_MODES:
        raise RoleError(
            source,
            "permissionMode",
            f"{mode!r} is not a permission mode",
            fix=f"use one of: {', '.join(PERMISSION_MODES)}",
        )
    prompt = body.strip()
    if not prompt:
        raise RoleError(
            source,
            "(body)",
            "the role prompt after the front matter is empty",
            fix="write the role's instructions (markdown) after the closing `---` line",
        )
    cwd_text = _text(meta, "cwd", source, "..")
    # normpath, not resolve(): parsing stays free of file-system access.
    cwd = Path(os.path.normpath(base_dir / Path(cwd_text).expanduser())) if cwd_text else None
    max_turns = _positive(meta, "maxTurns", source, integer=True)
    return Role(
        name=name,
        display_name=_text(meta, "displayName", source, "Developer") or name,
        category=category,
        prompt=prompt,
        source=source,
        cwd=cwd.absolute() if cwd else None,
        model=_text(meta, "model", source, "sonnet"),
        tools=_tools(meta, source),
        permission_mode=cast(PermissionMode, mode),
        max_turns=int(max_turns) if max_turns is not None else None,
        max_budget_usd=_positive(meta, "maxBudgetUsd", source, integer=False),
    )


def load_roles(roles_dir: Path, *, base_dir: Path) -> dict[str, Role]:
    """Every ``*.md`` in ``roles_dir``, keyed by name (which must equal the file stem)."""
    if not roles_dir.is_dir():
        raise RoleError(
            str(roles_dir),
            "(folder)",
            "the roles folder does not exist",
            fix="create it with one <name>.md per role, or point `roles:` in config.yaml to it",
        )
    files = sorted(roles_dir.glob("*.md"))
    if not files:
        raise RoleError(
            str(roles_dir),
            "(folder)",
            "no role files (*.md) in the roles folder",
            fix=f"add at least one role file, e.g. developer.md containing:\n{_EXAMPLE}",
        )
    roles: dict[str, Role] = {}
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise RoleError(
                str(path), "(file)", f"cannot read: {exc}", fix="make it a readable UTF-8 file"
            ) from exc
        role = parse_role(text, source=str(path), base_dir=base_dir)
        if role.name != path.stem:
            raise RoleError(
                str(path),
                "name",
                f"name {role.name!r} does not match the file name {path.name!r}",
                fix=f"set `name: {path.stem}` or rename the file to {role.name}.md",
            )
        if role.cwd is not None and not role.cwd.is_dir():
            raise RoleError(
                str(path),
                "cwd",
                f"folder {role.cwd} does not exist",
                fix="create it, or fix `cwd:` (relative paths start at config.yaml's folder)",
            )
        roles[role.name] = role
    logger.debug("loaded %d role(s) from %s", len(roles), roles_dir)
    return roles
