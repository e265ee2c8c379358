"""The bot's singletons (bot/singletons.py): following pull requests' checks, and taking over
what a stopped replica left (its agents still at work on workers, followed to their end and
their results delivered in their threads; the others announced interrupted).

A replica's run counts as stopped once its heartbeat in the store is missed (6 s with the
NATS store), so a replica SIGKILLed mid-run has its agents followed from another within
about ``TAKE_OVER_EVERY`` + 6 s.
"""

from __future__ import annotations

import asyncio
import logging

from bot.app import HarnessBot
from bot.singletons import Singleton
from harness.errors import HarnessError
from harness.tasks.nats_buckets import nats_failures
from harness.waits import stop_task

logger = logging.getLogger(__name__)

PULL_REQUESTS = "pull requests"
TAKE_OVER = "take over stopped replicas"
TAKE_OVER_EVERY = 2.0  # seconds between two looks for the runs that stopped


class _Looping:
    """One background task at a time, cancelled by ``stop``."""

    def __init__(self) -> None:
        self.task: asyncio.Task[None] | None = None

    async def stop(self) -> None:
        task, self.task = self.task, None
        if task is not None:
            await stop_task(task)


def following_pull_requests(bot: HarnessBot) -> Singleton:
    looping = _Looping()

    async def start() -> None:
        looping.task = bot.orchestrator.pull_requests.keep_following_pull_requests()

    return Singleton(PULL_REQUESTS, start, looping.stop)


async def take_over(bot: HarnessBot) -> int:
    """Follows the agents of the runs that stopped (another replica's) and settles or
    announces those that ended meanwhile; how many."""
    marked, adopted = await bot.orchestrator.take_over_stopped_runs()
    if not (marked or adopted):
        return 0
    logger.warning("taking over from a stopped replica: %d agent(s) followed, %d interrupted",
                   len(adopted), len(marked))  # fmt: skip
    only = {*adopted, *(record.agent_id for _, record in marked)}
    return await bot.conversations.watcher.resume(marked, only=only)


def taking_over(bot: HarnessBot) -> Singleton:
    looping = _Looping()

    async def loop() -> None:
        while True:
            unreachable: tuple[type[BaseException], ...] = (HarnessError, *nats_failures())
            try:
                await take_over(bot)
            except unreachable as exc:  # the store out of reach for now
                logger.warning("could not look for stopped replicas' agents: %s", exc)
            except Exception:  # the top of the job's loop: it must go on looking
                logger.exception("looking for stopped replicas' agents failed")
            await asyncio.sleep(TAKE_OVER_EVERY)

    async def start() -> None:
        looping.task = asyncio.get_running_loop().create_task(loop(), name=TAKE_OVER)

    return Singleton(TAKE_OVER, start, looping.stop)
