"""What the outbox keeps for a thread: an entry's steps, as the ledger stores them in JSON
(bot/outbox.py delivers them), and an entry held in memory while the ledger cannot take it."""

from __future__ import annotations

import dataclasses
from typing import Literal, NotRequired, TypedDict

from bot.blocks import SlackMessage
from harness.tasks.ledger import Owed


class PostStep(TypedDict):
    op: Literal["post"]
    message: SlackMessage | str


class UpdateStep(TypedDict):
    """Edit a message in place; when it is gone, post ``message`` instead."""

    op: Literal["update"]
    ts: str
    message: SlackMessage | str


class DeleteStep(TypedDict):
    """Remove a status message; when it cannot be removed, point it at what follows."""

    op: Literal["delete"]
    ts: str


class StopStreamStep(TypedDict):
    """Close a streamed reply with ``message``; when it is no longer a stream, edit it to
    ``message`` instead (and when it is gone, post it)."""

    op: Literal["stop_stream"]
    ts: str
    message: SlackMessage
    session_status: NotRequired[str]  # the thread's agent session takes it


class ReactStep(TypedDict):
    """Add the reaction ``name`` to a message (``remove``: take it off)."""

    op: Literal["react"]
    channel: str
    ts: str
    name: str
    remove: NotRequired[bool]


class UploadStep(TypedDict):
    """Share an agent's kept diff as a file; when Slack will not take it, say where it is."""

    op: Literal["upload"]
    task_slug: str
    agent_id: str
    filename: str
    title: str
    comment: str


Step = PostStep | UpdateStep | StopStreamStep | DeleteStep | ReactStep | UploadStep


class AgentRef(TypedDict):
    task_slug: str
    agent_id: str


class Entry(TypedDict):
    """An outbox entry as the ledger keeps it."""

    thread: list[str]  # [channel, thread_ts]
    steps: list[Step]
    agent: NotRequired[AgentRef]
    key: NotRequired[str]  # its posts carry it (with the message's number) in their metadata
    recheck: NotRequired[bool]  # it may have been posted before: look before each post


@dataclasses.dataclass(frozen=True)
class Held:
    """An entry the ledger refused, kept in memory with what it ends once delivered."""

    owed: Owed
    settles: str | None
    handles: str | None
