"""Who calls the MCP server. Pure.

Over stdio the caller is the local user, with the rights the terminal has (``by=None`` to
the orchestrator: the harness itself); over HTTP a Slack user named by their token, with the
rights they have in Slack: anyone may start tasks and follow up on those they see; the
task's requester and the admins decide (approve, stop). Which tasks they see is the core's
one rule (``harness/agents/visibility.py``): the local user is its operator, who sees all.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.agents.visibility import OPERATOR, Viewer


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

    @property
    def viewer(self) -> Viewer:
        """Who looks at tasks: the Slack user, or the operator at this machine."""
        return OPERATOR if self.user is None else self.user
