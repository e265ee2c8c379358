"""One backoff for every retry: how long to wait, and an operation tried until it works."""

from __future__ import annotations

import pytest

from harness.retry import Backoff, retrying

pytestmark = pytest.mark.anyio


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
