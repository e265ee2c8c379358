"""Who may decide for a task. Pure.

The person who asked for a task (its requester, recorded in task.json) and the admins
(``slack.admins`` in config.yaml) may approve what its agents run, stop its agents and run an
interrupted one again; nobody else may, whichever front end they come through. Anyone who can
reach a task may answer its agents' plain questions and follow up on it.
"""

from __future__ import annotations

from collections.abc import Collection

from harness.errors import NotAllowedError


class Authority:
    def __init__(self, admins: Collection[str]) -> None:
        self._admins = frozenset(admins)

    def may_decide(self, user: str, requester: str | None) -> bool:
        """Whether ``user`` may decide for a task asked for by ``requester`` (None: unknown,
        then only the admins may)."""
        return user in self._admins or (requester is not None and user == requester)

    def check(self, user: str, requester: str | None, action: str) -> None:
        """Raises NotAllowedError, saying who may, when ``user`` may not ``action``."""
        if not self.may_decide(user, requester):
            raise NotAllowedError(user, action, requester)
