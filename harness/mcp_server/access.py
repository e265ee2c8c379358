"""Who calls the MCP server, and which tasks they see. Pure.

Over stdio the caller is the local user, with the rights the terminal has (``by=None`` to
the orchestrator: the harness itself); over HTTP a Slack user named by their token, with the
rights they have in Slack: anyone may start tasks and follow up on those they see; the
task's requester and the admins decide (approve, stop). A person sees the tasks without a
thread (started from a terminal), their own, the tasks of channels they are in (when Slack
says which), and every task when they are an admin; nobody reads another person's DM task.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from harness.tasks.model import ThreadRef


@dataclass(frozen=True)
class Person:
    # The Slack user of an HTTP caller; None for the local user over stdio.
    user: str | None
    # Who asks, as recorded on tasks: the Slack user, else the local login.
    name: str

    @property
    def local(self) -> bool:
        return self.user is None

    @property
    def by(self) -> str | None:
        """Who acts, for the orchestrator's checks: None is the harness itself."""
        return self.user


def sees(
    person: Person,
    thread: ThreadRef | None,
    requester: str | None,
    *,
    may_decide: Callable[[str, str | None], bool],
    member_of: Collection[str] | None,
) -> bool:
    if person.user is None or thread is None:
        return True
    if may_decide(person.user, requester):
        return True
    return not thread.channel.startswith("D") and thread.channel in (member_of or ())
