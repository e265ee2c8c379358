"""Waiting before trying again, one way for the whole harness: exponential backoff with a cap.

``Backoff(first, cap)`` says how long to wait after the n-th failure (``first``, twice that,
... up to ``cap``); ``retrying`` runs an operation until it succeeds (or its tries run out),
waiting so between failures. Used for NATS publishes and tool calls, git's lock errors, Slack
posts and the outbox of owed deliveries.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    first: float
    cap: float
    factor: float = 2.0

    def delay(self, failures: int) -> float:
        """Seconds to wait after ``failures`` + 1 failures in a row (0: after the first)."""
        return float(min(self.first * self.factor ** min(max(failures, 0), 64), self.cap))

    def delays(self, count: int | None = None) -> Iterator[float]:
        """The waits after the first, second, ... failure (``count`` of them, or forever)."""
        failures = 0
        while count is None or failures < count:
            yield self.delay(failures)
            failures += 1


async def retrying(
    operation: Callable[[], Awaitable[T]],
    *,
    retry_on: type[BaseException] | tuple[type[BaseException], ...],
    backoff: Backoff,
    attempts: int | None = None,
    on_retry: Callable[[BaseException, float], None] = lambda _exc, _delay: None,
) -> T:
    """``operation()``'s result, trying again after each ``retry_on`` error (``on_retry`` is
    told the error and the wait); with ``attempts``, the last failure is raised."""
    delays = backoff.delays(None if attempts is None else attempts - 1)
    while True:
        try:
            return await operation()
        except retry_on as exc:
            delay = next(delays, None)
            if delay is None:
                raise
            on_retry(exc, delay)
            await asyncio.sleep(delay)
