"""Waiting before trying again, one way for the whole harness: exponential backoff with a cap,
and the one loop that tries an operation again.

``Backoff(first, cap)`` says how long to wait after the n-th failure (``first``, twice that,
... up to ``cap``). ``retrying`` runs an operation until it succeeds, waiting so between
failures: which failures are worth another try (their types, and ``retry_if`` on the error),
how many tries or how long in all, a wait the error itself asks for (a Retry-After), a word
to the caller before each wait (``on_retry``), and the sleep itself (tests pass their own).
Every retrying caller goes through it: NATS publishes, tool calls and event subscriptions,
git's lock errors, Slack posts and stream appends, GitHub's short rate limits, final records
the store refused. ``retrying_now`` is the same loop, with the same rules, for a blocking
operation in a worker thread (git's lock errors inside a whole workspace operation). (The
outbox of owed deliveries persists its schedule, ``Backoff.delay``, in its ledger instead:
its retries outlive the process.)
"""

from __future__ import annotations

import asyncio
import time
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


class _Tries:
    """What one retrying call has tried so far, and whether (and how long) to wait before
    the next try: the loop's rules, shared by :func:`retrying` and :func:`retrying_now`."""

    def __init__(
        self,
        *,
        backoff: Backoff,
        retry_if: Callable[[BaseException], bool],
        attempts: int | None,
        within: float | None,
        wait_hint: Callable[[BaseException], float | None],
        already_failed: int,
        on_retry: Callable[[BaseException, float], None],
        clock: Callable[[], float],
    ) -> None:
        if attempts is not None and attempts < 1:
            raise ValueError(f"attempts must be at least 1, not {attempts}")
        self._backoff = backoff
        self._retry_if = retry_if
        self._attempts = attempts
        self._within = within
        self._wait_hint = wait_hint
        self._on_retry = on_retry
        self._clock = clock
        self._start = clock()
        self._failures = already_failed
        self._tries = 0

    def first_wait(self) -> float:
        """The wait before the first try: as after the failures before this call."""
        return self._backoff.delay(self._failures - 1) if self._failures > 0 else 0.0

    def begin(self) -> None:
        self._tries += 1

    def wait_after(self, exc: BaseException) -> float | None:
        """The wait before trying again after ``exc``; None: give up, and raise it."""
        if not self._retry_if(exc) or (
            self._attempts is not None and self._tries >= self._attempts
        ):
            return None
        hinted = self._wait_hint(exc)
        delay = self._backoff.delay(self._failures) if hinted is None else max(hinted, 0.0)
        if self._within is not None and self._clock() + delay - self._start > self._within:
            return None
        self._failures += 1
        self._on_retry(exc, delay)
        return delay


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
    tries = _Tries(
        backoff=backoff, retry_if=retry_if, attempts=attempts, within=within,
        wait_hint=wait_hint, already_failed=already_failed, on_retry=on_retry, clock=clock,
    )  # fmt: skip
    if first := tries.first_wait():
        await sleep(first)
    while True:
        tries.begin()
        try:
            return await operation()
        except retry_on as exc:
            delay = tries.wait_after(exc)
            if delay is None:
                raise
            await sleep(delay)


def retrying_now(
    operation: Callable[[], T],
    *,
    retry_on: type[BaseException] | tuple[type[BaseException], ...],
    backoff: Backoff,
    attempts: int | None = None,
    on_retry: Callable[[BaseException, float], None] = _silent,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """:func:`retrying` for a blocking operation, run in a worker thread (blocking): the
    same rules, with its waits slept in the thread."""
    tries = _Tries(
        backoff=backoff, retry_if=_any_error, attempts=attempts, within=None,
        wait_hint=_no_hint, already_failed=0, on_retry=on_retry, clock=SYSTEM.monotonic,
    )  # fmt: skip
    while True:
        tries.begin()
        try:
            return operation()
        except retry_on as exc:
            delay = tries.wait_after(exc)
            if delay is None:
                raise
            sleep(delay)
