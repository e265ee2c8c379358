"""``harness memory list|add|rm|edit``: the team's notes per channel and repository (the
same ones ``@harness remember`` and ``/harness memory`` keep in Slack), read and changed
beside the tasks with no bot running. The terminal's user is the operator: they may change
every note.

- ``list [SCOPE] [--json]``: every scope's notes, or one scope's;
- ``add SCOPE TEXT``: SCOPE is ``channel:<id>`` or ``repo:<name>`` (a configured repository);
- ``rm ID`` and ``edit ID TEXT``: the note with that id, in whichever scope holds it.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.memory.model import Note
    from harness.memory.service import TeamMemory
    from harness.project import Project

ACTIONS = ("list", "add", "rm", "edit")
USAGE = {
    "list": "harness memory list [channel:<id>|repo:<name>]",
    "add": "harness memory add channel:<id>|repo:<name> TEXT",
    "rm": "harness memory rm NOTE_ID",
    "edit": "harness memory edit NOTE_ID TEXT",
}


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    parser = subparsers.add_parser(
        "memory",
        parents=[common],
        help="list, add, remove or edit the notes every agent of a channel or repository gets",
        description="The team's memory: short notes kept per Slack channel (channel:<id>) and "
        "per repository (repo:<name>), given to every agent of that channel or repository in "
        "its context. `list [SCOPE]`, `add SCOPE TEXT`, `rm NOTE_ID`, `edit NOTE_ID TEXT`.",
    )
    parser.add_argument("action", nargs="?", choices=ACTIONS, default="list")
    parser.add_argument("words", nargs="*", help="the scope, the note's id, and its text")
    parser.add_argument("--json", action="store_true", help="print JSON (for scripts)")
    parser.set_defaults(handler=main)


def main(project: Project, args: argparse.Namespace) -> int:
    # Imported here, not at the top: every command's parser imports this module.
    import asyncio

    return asyncio.run(_main(project, args))


async def _main(project: Project, args: argparse.Namespace) -> int:
    from harness.clock import SYSTEM
    from harness.memory.service import opened_memory

    async with opened_memory(project.config, SYSTEM) as memory:
        return await _act(project, args, memory)


async def _act(project: Project, args: argparse.Namespace, memory: TeamMemory) -> int:
    import getpass
    import json

    from harness.memory.model import note_to_json
    from harness.memory.service import Actor

    action, words = args.action, list(args.words)
    user = getpass.getuser()
    if action == "list":
        scopes = [_scope(project, words[0])] if words else await memory.scopes()
        _needs(action, len(words) <= 1)
        listed = [(scope, await memory.notes(scope)) for scope in scopes]
        if args.json:
            data = {scope: [dict(note_to_json(n)) for n in notes] for scope, notes in listed}
            print(json.dumps(data, indent=2, ensure_ascii=False))
        else:
            print(render(listed))
        return 0
    if action == "add":
        _needs(action, len(words) >= 2)
        note = await memory.add(_scope(project, words[0]), " ".join(words[1:]), by=user)
        said = "added"
    elif action == "rm":
        _needs(action, len(words) == 1)
        found = await _locate(memory, words[0])
        note = await memory.remove(found.scope, found.id, by=Actor(user, operator=True))
        said = "removed"
    else:
        _needs(action, len(words) >= 2)
        found = await _locate(memory, words[0])
        text = " ".join(words[1:])
        note = await memory.edit(found.scope, found.id, text, by=Actor(user, operator=True))
        said = "edited"
    if args.json:
        print(json.dumps({said: dict(note_to_json(note))}, indent=2, ensure_ascii=False))
    else:
        print(f"{said} {note.id} ({_where(note.scope)}): {note.text}")
    return 0


def _needs(action: str, ok: bool) -> None:
    from harness.errors import HarnessError

    if not ok:
        raise HarnessError(f"`harness memory {action}` takes other arguments",
                           fix=f"run `{USAGE[action]}`")  # fmt: skip


def _scope(project: Project, text: str) -> str:
    """A scope as typed; a repository must be one config.yaml names."""
    from harness.errors import HarnessError
    from harness.memory.model import parse_scope, split_scope
    from harness.problems import did_you_mean

    scope = parse_scope(text)
    kind, name = split_scope(scope)
    known = sorted(project.config.workspaces.repositories)
    if kind == "repository" and name not in known:
        raise HarnessError(
            f"no repository {name!r} in {project.config.file}",
            fix=f"{did_you_mean(name, known)}the repositories are: {', '.join(known) or '(none)'}",
        )
    return scope


async def _locate(memory: TeamMemory, note_id: str) -> Note:
    return await memory.locate(note_id.strip("`"))


def _where(scope: str) -> str:
    from harness.memory.model import describe_scope

    return describe_scope(scope)


def render(listed: list[tuple[str, tuple[Note, ...]]]) -> str:
    if not listed:
        return (
            "No notes yet. Add one with `harness memory add channel:<id>|repo:<name> TEXT`, "
            "or `@harness remember <note>` in Slack."
        )
    lines: list[str] = []
    for scope, notes in listed:
        lines.append(f"{_where(scope)}: {len(notes)} note(s)")
        for note in notes:
            origin = "an agent's, kept by " if note.source == "agent" else ""
            lines.append(f"  {note.id}  {note.text}  ({origin}{note.added_by}, {note.at})")
    return "\n".join(lines)
