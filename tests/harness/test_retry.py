"""One backoff for every retry: how long to wait, and an operation tried until it works.

Pure: the waits go to a fake sleep that moves a fake clock, so no test waits for real."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from harness.retry import Backoff, retrying, retrying_now

pytestmark = pytest.mark.anyio


class Waits:
    """A sleep that only notes each wait and moves its clock on by it."""

    def __init__(self) -> None:
        self.now = 100.0
        self.seen: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.seen.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now


class RateLimitedError(Exception):
    def __init__(self, retry_after: float | None) -> None:
        super().__init__(f"rate-limited (Retry-After: {retry_after})")
        self.retry_after = retry_after


def failing(
    *errors: BaseException, then: str = "done"
) -> tuple[Callable[[], Awaitable[str]], list[int]]:
    """An operation raising ``errors`` one per try, then answering ``then``; and its tries."""
    tries: list[int] = []
    left = list(errors)

    async def operation() -> str:
        tries.append(len(tries) + 1)
        if left:
            raise left.pop(0)
        return then

    return operation, tries


def test_waits_double_from_the_first_up_to_the_cap() -> None:
    backoff = Backoff(first=0.5, cap=3.0)

    assert [backoff.delay(n) for n in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert backoff.delay(10_000) == 3.0
    assert list(backoff.delays(3)) == [0.5, 1.0, 2.0]


async def test_an_operation_is_tried_again_until_it_works_and_each_wait_is_told() -> None:
    failures = [OSError("down"), OSError("still down")]
    told: list[tuple[str, float]] = []

    async def flaky() -> str:
        if failures:
            raise failures.pop(0)
        return "stored"

    result = await retrying(
        flaky,
        retry_on=OSError,
        backoff=Backoff(first=0.001, cap=0.002),
        on_retry=lambda exc, delay: told.append((str(exc), delay)),
    )

    assert result == "stored"
    assert told == [("down", 0.001), ("still down", 0.002)]


async def test_out_of_tries_the_last_failure_is_raised_and_other_errors_at_once() -> None:
    calls: list[int] = []

    async def always(error: Exception) -> None:
        calls.append(1)
        raise error

    with pytest.raises(OSError, match="third"):
        errors = iter([OSError("first"), OSError("second"), OSError("third")])
        await retrying(
            lambda: always(next(errors)),
            retry_on=OSError,
            backoff=Backoff(first=0.001, cap=0.001),
            attempts=3,
        )
    with pytest.raises(ValueError):
        await retrying(
            lambda: always(ValueError("no")), retry_on=OSError, backoff=Backoff(0.001, 0.001)
        )
    assert len(calls) == 4


async def test_each_wait_is_the_backoffs_next_and_only_the_tries_allowed_are_made() -> None:
    waits = Waits()
    operation, tries = failing(*(OSError(f"down {n}") for n in range(1, 10)))

    with pytest.raises(OSError, match="down 4"):
        await retrying(
            operation,
            retry_on=OSError,
            backoff=Backoff(first=0.5, cap=1.5),
            attempts=4,
            sleep=waits.sleep,
        )

    assert tries == [1, 2, 3, 4]
    assert waits.seen == [0.5, 1.0, 1.5]  # none after the last try


async def test_a_single_attempt_is_never_tried_again() -> None:
    waits = Waits()
    operation, tries = failing(OSError("down"))

    with pytest.raises(OSError, match="down"):
        await retrying(
            operation, retry_on=OSError, backoff=Backoff(1, 1), attempts=1, sleep=waits.sleep
        )

    assert tries == [1] and waits.seen == []
    with pytest.raises(ValueError, match="at least 1"):
        await retrying(operation, retry_on=OSError, backoff=Backoff(1, 1), attempts=0)


async def test_a_wait_the_error_asks_for_is_waited_instead_of_the_backoffs() -> None:
    waits = Waits()
    told: list[float] = []
    operation, tries = failing(RateLimitedError(7.0), RateLimitedError(None), RateLimitedError(0.0))

    result = await retrying(
        operation,
        retry_on=RateLimitedError,
        backoff=Backoff(first=1.0, cap=8.0),
        wait_hint=lambda exc: exc.retry_after if isinstance(exc, RateLimitedError) else None,
        on_retry=lambda _exc, delay: told.append(delay),
        sleep=waits.sleep,
    )

    assert result == "done" and len(tries) == 4
    # Retry-After 7 s, then none said (the backoff's second wait), then "at once".
    assert waits.seen == told == [7.0, 2.0, 0.0]


async def test_only_errors_the_predicate_accepts_are_tried_again() -> None:
    waits = Waits()
    lock_held = OSError("Unable to create '.git/index.lock': File exists")
    refused = OSError("pathspec 'x' did not match any files")
    operation, tries = failing(lock_held, refused)

    with pytest.raises(OSError) as raised:
        await retrying(
            operation,
            retry_on=OSError,
            retry_if=lambda exc: "index.lock" in str(exc),
            backoff=Backoff(first=0.05, cap=1.6),
            sleep=waits.sleep,
        )

    assert raised.value is refused  # the error itself, not a wrapper
    assert tries == [1, 2] and waits.seen == [0.05]


async def test_no_try_is_made_that_would_start_past_the_deadline() -> None:
    waits = Waits()
    operation, tries = failing(*(TimeoutError(f"silent {n}") for n in range(1, 10)))

    with pytest.raises(TimeoutError, match="silent 3"):
        await retrying(
            operation,
            retry_on=TimeoutError,
            backoff=Backoff(first=1.0, cap=60.0),
            within=3.0,
            sleep=waits.sleep,
            clock=waits.clock,
        )

    # Tries at 0 s, 1 s and 3 s; the next would start at 7 s, past the 3 s allowed.
    assert tries == [1, 2, 3] and waits.seen == [1.0, 2.0]


async def test_an_operation_that_failed_before_waits_first_and_the_backoff_goes_on() -> None:
    waits = Waits()
    told: list[str] = []
    operation, tries = failing(OSError("still refused"))

    result = await retrying(
        operation,
        retry_on=OSError,
        backoff=Backoff(first=0.2, cap=30.0),
        already_failed=1,
        on_retry=lambda exc, _delay: told.append(str(exc)),
        sleep=waits.sleep,
    )

    assert result == "done" and tries == [1, 2]
    assert waits.seen == [0.2, 0.4]  # as after the failure before, then after this one
    assert told == ["still refused"]  # the failure before was the caller's to tell


def test_a_blocking_operation_is_tried_again_by_the_same_rules_in_its_thread() -> None:
    slept: list[float] = []
    tries: list[str] = []

    def failing(*errors: Exception, then: str = "committed") -> Callable[[], str]:
        left = list(errors)

        def operation() -> str:
            tries.append(then)
            if left:
                raise left.pop(0)
            return then

        return operation

    backoff = Backoff(first=0.5, cap=0.75)
    worked = retrying_now(
        failing(OSError("index.lock"), OSError("index.lock")),
        retry_on=OSError, backoff=backoff, sleep=slept.append,
    )  # fmt: skip
    with pytest.raises(OSError, match="second"):  # out of tries: the last failure
        retrying_now(
            failing(OSError("first"), OSError("second"), OSError("third"), then="never"),
            retry_on=OSError, backoff=backoff, attempts=2, sleep=slept.append,
        )  # fmt: skip
    with pytest.raises(ValueError, match="not a lock"):
        retrying_now(failing(ValueError("not a lock"), then="other"), retry_on=OSError,
                     backoff=backoff, sleep=slept.append)  # fmt: skip

    assert worked == "committed" and slept == [0.5, 0.75, 0.5]
    assert tries == ["committed"] * 3 + ["never"] * 2 + ["other"]
