"""Slack misbehaving on cue: failures queued for the emulator's Web API methods, and stalls.

Tests reach them as `SlackEmulator.faults`; the server (`bot.testing.slack_server`) takes the
next fault of a method before answering it, and waits while the method is stalled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal


@dataclass
class Fault:
    status: int
    retry_after: int | None
    error: str
    # A raw body instead of Slack's JSON (an HTML or text page from Slack's edge or a proxy).
    body: str | bytes | None = None
    content_type: str = "text/html"
    # "reset": the connection is closed without an answer; "hang": no answer until the
    # client gives up (its timeout) or the emulator stops.
    drop: Literal["reset", "hang"] | None = None
    # The call is carried out before it goes unanswered: Slack did it, its answer was lost.
    applied: bool = False


class Faults:
    """The failures queued per method ("upload" for the upload URL), and the stalled methods."""

    def __init__(self) -> None:
        self._queued: dict[str, list[Fault]] = {}
        self._stalled: set[str] = set()
        self._unstalled = asyncio.Event()
        self.waiting: list[str] = []  # the methods of the calls held by a stall now

    def fail_next(
        self,
        method: str,
        times: int = 1,
        status: int = 429,
        retry_after: int | None = 1,
        error: str | None = None,
        *,
        body: str | bytes | None = None,
        content_type: str = "text/html",
    ) -> None:
        """Makes the next `times` calls of `method` fail: HTTP 429 + Retry-After by default
        (`retry_after=None`: a 429 without the header), or any status (200 with `error` for a
        Slack error such as "channel_not_found"). With `body`, the answer is that raw body as
        `content_type` instead of Slack's JSON: the HTML or text page Slack's edge or a proxy
        answers a 502/503 with ("" for an empty body)."""
        default = (
            "ratelimited" if status == 429 else "internal_error" if status >= 500 else "fatal_error"
        )
        fault = Fault(status, retry_after, error or default, body, content_type)
        self._queued.setdefault(method, []).extend([fault] * times)

    def drop_next(self, method: str, times: int = 1, *, how: Literal["reset", "hang"]) -> None:
        """Makes the next `times` calls of `method` go unanswered: `reset` closes the
        connection at once (a reset by a proxy), `hang` keeps it open without a word until the
        client gives up on it (past its timeout)."""
        fault = Fault(0, None, "dropped", drop=how)
        self._queued.setdefault(method, []).extend([fault] * times)

    def apply_then_drop(
        self, method: str, times: int = 1, *, how: Literal["reset", "hang"] = "reset"
    ) -> None:
        """Makes the next `times` calls of `method` take effect (a post is posted) and then
        go unanswered as `drop_next` says: the client cannot tell it was done."""
        fault = Fault(0, None, "dropped", drop=how, applied=True)
        self._queued.setdefault(method, []).extend([fault] * times)

    def clear(self) -> None:
        """Slack is healthy again: no more failures queued by `fail_next`."""
        self._queued.clear()

    def stall(self, *methods: str) -> None:
        """Calls of `methods` hang (no answer) until `unstall`: Slack not answering."""
        self._stalled.update(methods)
        self._unstalled.clear()

    def unstall(self) -> None:
        """Stalled calls are answered, and new ones no longer stall."""
        self._stalled.clear()
        self._unstalled.set()

    def take(self, method: str) -> Fault | None:
        """The fault the next call of `method` meets, if one is queued (it is used up)."""
        queued = self._queued.get(method)
        return queued.pop(0) if queued else None

    async def wait_if_stalled(self, method: str, arrived: Callable[[], Awaitable[None]]) -> None:
        """Holds a call of a stalled ``method`` until ``unstall``; ``arrived()`` once it is
        held (``waiting`` names it meanwhile)."""
        if method in self._stalled:
            self.waiting.append(method)
            try:
                await arrived()
                await self._unstalled.wait()
            finally:
                self.waiting.remove(method)
