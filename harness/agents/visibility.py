"""Who may see a task. Pure: the one rule for Slack, ``harness mcp`` and the terminal.

The operator at this machine (the terminal's ``harness`` commands, ``harness mcp`` over stdio)
has the harness's own rights: they see every task. A Slack user (in Slack, or ``harness mcp``
over HTTP with their token) sees the tasks without a thread (started from a terminal), the
tasks they may decide for (their own, and every task for an admin: ``authority.py``'s rule),
and the tasks of the channels they are in, when Slack says which. Nobody reads the request of
a thread they could not read in Slack: another person's DM task stays theirs.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from harness.tasks.model import TaskSummary, ThreadRef

# The authority's rule: whether a user may decide for a task asked for by a requester.
MayDecide = Callable[[str, str | None], bool]


@dataclass(frozen=True)
class Operator:
    """The person at this machine, with the harness's own rights."""


OPERATOR: Final = Operator()
# Who looks at tasks: a Slack user id, or the operator.
Viewer = str | Operator


def is_direct_message(channel: str) -> bool:
    """Slack's DM channel ids start with D (events and commands may not say the type)."""
    return channel.startswith("D")


def may_see(
    viewer: Viewer,
    thread: ThreadRef | None,
    requester: str | None,
    *,
    may_decide: MayDecide,
    member_of: Collection[str] | None,
) -> bool:
    """Whether ``viewer`` may see a task in ``thread`` asked for by ``requester``;
    ``member_of``: the channels a Slack user is in, None when Slack did not say."""
    if isinstance(viewer, Operator) or thread is None:
        return True
    if may_decide(viewer, requester):
        return True
    return not is_direct_message(thread.channel) and thread.channel in (member_of or ())


def visible(
    viewer: Viewer,
    summaries: Sequence[TaskSummary],
    *,
    may_decide: MayDecide,
    member_of: Collection[str] | None,
) -> list[TaskSummary]:
    """``summaries`` less those ``viewer`` may not see, in order."""
    return [
        s
        for s in summaries
        if may_see(viewer, s.thread, s.requester, may_decide=may_decide, member_of=member_of)
    ]


def needs_channels(viewer: Viewer, threads: Iterable[ThreadRef | None]) -> bool:
    """Whether the channels ``viewer`` is in decide what they see of tasks in ``threads``:
    only a Slack user's, and only for a channel's task (ask Slack only then)."""
    return not isinstance(viewer, Operator) and any(
        t is not None and not is_direct_message(t.channel) for t in threads
    )
