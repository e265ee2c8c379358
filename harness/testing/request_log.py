"""What a scripted model was asked: every request in order, the script's failures, and
waiting for a request. Safe from any thread: the model serves from its own event loop while
tests wait from theirs, or from a thread of their own."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from harness.testing.model_turns import ModelRequest, Predicate, is_side_request
from harness.waits import within

logger = logging.getLogger(__name__)


@dataclass
class _Waiter:
    predicate: Predicate
    after: int
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[ModelRequest]


def _settle(future: asyncio.Future[ModelRequest], request: ModelRequest | BaseException) -> None:
    if future.done():
        return
    if isinstance(request, BaseException):
        future.set_exception(request)
    else:
        future.set_result(request)


def _notify(waiter: _Waiter, outcome: ModelRequest | BaseException) -> None:
    with contextlib.suppress(RuntimeError):  # the waiter's loop is closed: nobody waits
        waiter.loop.call_soon_threadsafe(_settle, waiter.future, outcome)


def _matches(predicate: Predicate | None, request: ModelRequest) -> bool:
    if predicate is None:
        return not request.is_side_request
    return predicate(request)


class RequestLog:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._requests: list[ModelRequest] = []
        self._waiters: list[_Waiter] = []
        self._errors: list[str] = []

    @property
    def requests(self) -> list[ModelRequest]:
        """Every request so far, in order (a snapshot)."""
        with self._lock:
            return list(self._requests)

    @property
    def errors(self) -> list[str]:
        """Script failures, in order."""
        with self._lock:
            return list(self._errors)

    def add_error(self, message: str) -> None:
        with self._lock:
            self._errors.append(message)

    def record(self, body: dict[str, Any], headers: dict[str, str]) -> ModelRequest:
        """The request, recorded; whoever waits for one like it is woken."""
        with self._lock:
            request = ModelRequest(
                body=body,
                headers=headers,
                received_at=time.time(),
                is_side_request=is_side_request(body),
                index=len(self._requests),
            )
            self._requests.append(request)
            self._changed.notify_all()
            settled: list[tuple[_Waiter, ModelRequest | BaseException]] = []
            for waiter in list(self._waiters):
                if request.index < waiter.after:
                    continue
                try:
                    matched = waiter.predicate(request)
                except Exception as exc:
                    logger.exception("wait_for_request predicate failed")
                    settled.append((waiter, exc))
                    continue
                if matched:
                    settled.append((waiter, request))
            for waiter, outcome in settled:
                self._waiters.remove(waiter)
                _notify(waiter, outcome)
        logger.debug("model request %s", request.summary())
        return request

    def close(self, error: BaseException) -> None:
        """Every waiter still waiting fails with ``error`` (the model stopped)."""
        with self._lock:
            waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            _notify(waiter, error)

    def _timeout_error(self, timeout: float) -> TimeoutError:
        seen = "; ".join(r.summary() for r in self.requests) or "none"
        return TimeoutError(f"no matching model request within {timeout} s (recorded: {seen})")

    async def wait_for(
        self, predicate: Predicate | None = None, timeout: float = 10.0, *, after: int = 0
    ) -> ModelRequest:
        """The first recorded request (index >= ``after``) matching ``predicate`` (default: any
        main request), waiting up to ``timeout`` seconds for it. Works from any event loop."""
        loop = asyncio.get_running_loop()
        with self._lock:
            for request in self._requests[after:]:
                if _matches(predicate, request):
                    return request
            future: asyncio.Future[ModelRequest] = loop.create_future()
            waiter = _Waiter(lambda r: _matches(predicate, r), after, loop, future)
            self._waiters.append(waiter)
        try:
            return await within(waiter.future, timeout)
        except TimeoutError:
            raise self._timeout_error(timeout) from None
        finally:
            with self._lock:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def wait_for_sync(
        self, predicate: Predicate | None = None, timeout: float = 10.0, *, after: int = 0
    ) -> ModelRequest:
        """Blocking ``wait_for`` for threads."""
        found: list[ModelRequest] = []

        def ready() -> bool:
            for request in self._requests[after:]:
                if _matches(predicate, request):
                    found.append(request)
                    return True
            return False

        with self._changed:
            matched = self._changed.wait_for(ready, timeout)
        if not matched:  # said outside the lock, which listing the requests takes
            raise self._timeout_error(timeout)
        return found[0]
