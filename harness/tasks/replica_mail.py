"""Mail between bot replicas, on the task store's NATS server: each replica serves a subject
named by its run, and another replica hands it, verbatim, what must be handled where a
thread's agent is held (its questions, approvals, Stop and queued follow-ups live in that
process). The receiver acknowledges a letter before it handles it; a letter nobody
acknowledges in time is the sender's to handle (``send`` says False)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from harness.config.store_schema import StoreSettings
from harness.tasks.nats_buckets import Buckets, nats_failures, open_buckets
from harness.tasks.nats_liveness import HEARTBEAT_SECONDS, MISSED_BEATS
from harness.tasks.run_lock import is_run_id

if TYPE_CHECKING:
    from nats.aio.msg import Msg
    from nats.aio.subscription import Subscription

logger = logging.getLogger(__name__)

SEND_SECONDS = 2.0  # a forwarded Slack request must still be acked within Slack's 3 s
TAKEN = b"taken"


def subject(prefix: str, run_id: str) -> str:
    return f"{prefix}.replica.{run_id}"


class ReplicaMail:
    def __init__(self, settings: StoreSettings) -> None:
        self._settings = settings
        self._buckets: Buckets | None = None
        self._subscription: Subscription | None = None
        self._handling: set[asyncio.Task[None]] = set()

    async def _open(self) -> Buckets:
        if self._buckets is None:
            self._buckets = await open_buckets(
                self._settings, run_ttl=HEARTBEAT_SECONDS * MISSED_BEATS
            )
        return self._buckets

    async def serve(
        self, run_id: str, handle: Callable[[bytes], Coroutine[Any, Any, None]]
    ) -> None:
        """Takes the letters sent to ``run_id`` (this replica's run): each acknowledged, then
        handled in a task of its own."""
        buckets = await self._open()

        async def handled(data: bytes) -> None:
            try:
                await handle(data)
            except Exception:  # the top of one letter's handling: the next ones go on
                logger.exception("handling a letter from another replica failed")

        async def on_letter(letter: Msg) -> None:
            await letter.respond(TAKEN)
            task = asyncio.get_running_loop().create_task(handled(letter.data), name="letter")
            self._handling.add(task)
            task.add_done_callback(self._handling.discard)

        name = subject(buckets.names.prefix, run_id)
        self._subscription = await buckets.nc.subscribe(name, cb=on_letter)

    async def send(self, run_id: str, letter: bytes, timeout: float = SEND_SECONDS) -> bool:
        """Whether the replica of ``run_id`` took ``letter`` (False: it is gone, out of reach
        or too slow, and the sender handles it itself)."""
        if not is_run_id(run_id):
            return False
        try:
            buckets = await self._open()
            answer = await buckets.nc.request(
                subject(buckets.names.prefix, run_id), letter, timeout=timeout
            )
        except nats_failures() as exc:
            logger.warning("replica %s did not take a letter: %s", run_id, exc or type(exc))
            return False
        return answer.data == TAKEN

    async def close(self) -> None:
        if self._subscription is not None:
            subscription, self._subscription = self._subscription, None
            await asyncio.gather(subscription.unsubscribe(), return_exceptions=True)
        await asyncio.gather(*self._handling, return_exceptions=True)
        if self._buckets is not None:
            await self._buckets.close()
            self._buckets = None
