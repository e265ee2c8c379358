"""Waiting before trying again, one way for the whole harness: exponential backoff with a cap,
and the one loop that tries an operation again.

``Backoff(first, cap)`` says how long to wait after the n-th failure (``first``, twice that,
... up to ``cap``). ``retrying`` runs an operation until it succeeds, waiting so between
failures: which failures are worth another try (their types, and ``retry_if`` on the error),
how many tries or how long in all, a wait the error itself asks for (a Retry-After), a word
to the caller before each wait (``on_retry``), and the sleep itself (tests pass their own).
Every retrying caller goes through it: NATS publishes, tool calls and event subscriptions,
git's lock errors, Slack posts and stream appends, GitHub's short rate limits, final records
the store refused. (The outbox of owed deliveries persists its schedule, ``Backoff.delay``,
in its ledger instead: its retries outlive the process.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from harness.clock import SYSTEM

T = TypeVar("T")

Sleep = Callable[[float], Awaitable[None]]


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


def _any_error(_exc: BaseException) -> bool:
    return True


def _no_hint(_exc: BaseException) -> float | None:
    return None


def _silent(_exc: BaseException, _delay: float) -> None:
    return None


async def retrying(
    operation: Callable[[], Awaitable[T]],
    *,
    retry_on: type[BaseException] | tuple[type[BaseException], ...],
    backoff: Backoff,
    retry_if: Callable[[BaseException], bool] = _any_error,
    attempts: int | None = None,
    within: float | None = None,
    wait_hint: Callable[[BaseException], float | None] = _no_hint,
    already_failed: int = 0,
    on_retry: Callable[[BaseException, float], None] = _silent,
    sleep: Sleep = asyncio.sleep,
    clock: Callable[[], float] = SYSTEM.monotonic,
) -> T:
    """``operation()``'s result, tried again after each failure that is a ``retry_on`` error
    and passes ``retry_if``; any other error is raised at once.

    The wait after a failure is what ``wait_hint`` reads from the error (a Retry-After), else
    the backoff's next. ``attempts`` bounds the tries of this call, ``within`` (seconds of
    ``clock`` from the call) the time: a retry whose wait would end past it is not made. Out
    of tries or time, the last failure is raised. ``on_retry`` is told each failure and the
    wait before the next try. ``already_failed``: failures of the operation before this call
    (tried once elsewhere, say): the first try waits as after them, and the backoff goes on
    from there.
    """
    if attempts is not None and attempts < 1:
        raise ValueError(f"attempts must be at least 1, not {attempts}")
    start = clock()
    failures = already_failed
    if failures > 0:
        await sleep(backoff.delay(failures - 1))
    tries = 0
    while True:
        tries += 1
        try:
            return await operation()
        except retry_on as exc:
            if not retry_if(exc) or (attempts is not None and tries >= attempts):
                raise
            hinted = wait_hint(exc)
            delay = backoff.delay(failures) if hinted is None else max(hinted, 0.0)
            if within is not None and clock() + delay - start > within:
                raise
            failures += 1
            on_retry(exc, delay)
            await sleep(delay)
