"""Real ``harness bot --mode http`` processes on a clock the test sets by writing a file
(``bot.testing.clocked_bot``), for the routines' tests across restarts and kills: each one's
log is read as it goes (so its pipe never fills) and shown when a wait fails, with every
thread's stack when the bot does not end."""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.testing.slack_emulator import SlackEmulator
from harness.project import load_project
from harness.routines.model import RoutineState
from harness.routines.state import RoutineStates
from harness.testing import spawn
from tests.bot.conftest import WAIT


@dataclass
class ClockedBot:
    process: asyncio.subprocess.Process
    url: str = ""
    banner: str = ""  # its start line: where it listens, the workspace, the config
    lines: list[str] = field(default_factory=list)
    _reader: asyncio.Future[None] | None = None

    async def _read(self) -> None:
        assert self.process.stderr is not None
        while line := await self.process.stderr.readline():
            self.lines.append(line.decode(errors="replace"))

    async def stop(self) -> int:
        """SIGTERM, as a service manager stops it; its exit code."""
        if self.process.returncode is None:
            self.process.terminate()
        return await self.ended()

    async def kill(self) -> None:
        self.process.kill()
        await self.ended()

    async def ended(self) -> int:
        try:
            code = await asyncio.wait_for(self.process.wait(), WAIT)
        except TimeoutError:
            raise AssertionError(
                f"the bot did not end within {WAIT} s; where it was:\n{await self._stacks()}"
            ) from None
        if self._reader is not None:
            await self._reader
        return code

    async def _stacks(self) -> str:
        """The end of its log after a SIGABRT, on which its faulthandler (every test bot runs
        with one) writes each thread's stack there."""
        self.process.send_signal(signal.SIGABRT)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.process.wait(), WAIT)
            if self._reader is not None:
                await asyncio.wait_for(self._reader, WAIT)
        return "".join(self.lines[-120:])


def this_minute() -> datetime:
    """The real minute now: the clock file's times stay near the real time, which Slack's
    request signatures are checked against."""
    return datetime.now(UTC).replace(second=0, microsecond=0)


@contextlib.asynccontextmanager
async def clocked_bot(
    config: Path,
    slack: SlackEmulator,
    env: Mapping[str, str],
    clock_file: Path | None,
    *launcher: str,
    bot_args: tuple[str, ...] = ("--mode", "http", "--port", "0"),
) -> AsyncIterator[ClockedBot]:
    """The bot on ``clock_file``'s time (None: the real time, `harness bot` itself) serving
    ``slack`` once it listens; killed at the end if the test did not stop it. ``launcher``:
    more of ``bot.testing.clocked_bot``'s options."""
    start = (
        ("bot.testing.clocked_bot", str(clock_file), *launcher, "--")
        if clock_file
        else ("harness",)
    )
    process = await spawn.create_subprocess_exec(
        sys.executable, "-X", "faulthandler", "-m", *start, "bot", *bot_args,
        "--config", str(config),
        env=dict(env), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    bot = ClockedBot(process)
    try:
        assert process.stderr is not None
        while True:
            line = await asyncio.wait_for(process.stderr.readline(), WAIT)
            bot.lines.append(line.decode(errors="replace"))
            assert line, "the bot exited before it listened:\n" + "".join(bot.lines[-30:])
            if b"harness bot: " in line and b"connected to Slack" in line:
                break
        listening = re.search(r"listening on (http://\S+/slack/events)", bot.lines[-1])
        if listening is not None:
            bot.url = listening.group(1)
            slack.bot_url, slack.delivery = bot.url, "http"
        bot.banner = bot.lines[-1]
        bot._reader = asyncio.ensure_future(bot._read())
        yield bot
    finally:
        if process.returncode is None:
            process.kill()
        await bot.ended()


def states(config: Path) -> RoutineStates:
    return RoutineStates(load_project(config).config.tasks_dir)


async def until(check: Callable[[], object], what: str, bot: ClockedBot | None = None) -> None:
    """Waits, within a bound, until ``check()`` holds (a file another process writes)."""
    try:
        async with asyncio.timeout(WAIT):
            while not check():
                await asyncio.sleep(0.05)
    except TimeoutError:
        log = "".join(bot.lines[-40:]) if bot else ""
        raise AssertionError(f"not within {WAIT} s: {what}\n{log}") from None


async def ticked(config: Path, bot: ClockedBot) -> None:
    """Returns once the bot's scheduler has run a whole tick after this call: it answers two
    run requests in turn (each tick takes the requests, then looks at the schedules)."""
    folder = states(config)
    for n in range(2):
        request_id = f"tick-{n}-{datetime.now(UTC).timestamp()}"
        folder.request_run({"id": request_id, "routine": "no-such-routine", "by": "test"})
        answer = folder.requests / f"{request_id}.answer.json"
        await until(answer.exists, "the scheduler answers a run request", bot)
        folder.take_answer(request_id)


def routine_state(config: Path, name: str) -> RoutineState:
    return states(config).read(name)


def slot(minute: datetime, minutes: int) -> tuple[datetime, str]:
    moment = minute + timedelta(minutes=minutes)
    return moment, moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
