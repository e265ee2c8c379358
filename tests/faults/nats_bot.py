"""Scaffolding for the fault tests of a bot whose agents run on workers: a real nats-server,
the scripted model, the Slack emulator, ``harness bot`` processes started (and stopped) as
people run them, alone or as replicas on one config, and ``harness worker`` processes whose
logs are read as they go."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from bot.testing.slack_emulator import SlackEmulator
from harness.project import load_project
from harness.testing.nats_server import NatsServer
from harness.testing.scripted_model import ModelRequest, Script, ScriptedModel, Turn
from harness.testing.workers import start_worker, worker_env
from tests.bot.clocked_bots import ClockedBot, clocked_bot
from tests.bot.conftest import BOT_TOKEN, SECRET, WAIT, message_text, session_of
from tests.faults.runs import stored_dispatches


class HeldUntilReleased:
    """Every agent's turn waits until ``release`` is set, then finishes."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.sessions: set[str] = set()
        self._started = asyncio.Condition()

    async def __call__(self, request: ModelRequest) -> Turn:
        self.sessions.add(session_of(request))
        async with self._started:
            self._started.notify_all()
        await self.release.wait()
        return Turn.finish(f"Done: {request.first_user_text.strip().splitlines()[-1]}")

    async def until_started(self, count: int, timeout: float) -> None:
        """Waits, within ``timeout`` seconds, until ``count`` agents' sessions have begun."""
        async with asyncio.timeout(timeout), self._started:
            await self._started.wait_for(lambda: len(self.sessions) >= count)


@dataclass
class WorkerProcess:
    """A ``harness worker`` process, its log read line by line as it goes (so its pipe
    never fills) and kept."""

    process: asyncio.subprocess.Process
    lines: list[str] = field(default_factory=list)
    _said: asyncio.Event = field(default_factory=asyncio.Event)
    _reader: asyncio.Future[None] | None = None

    def __post_init__(self) -> None:
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self.process.stderr is not None
        while line := await self.process.stderr.readline():
            self.lines.append(line.decode(errors="replace"))
            self._said.set()

    async def said(self, needle: str, timeout: float = WAIT) -> str:
        """The first line of its log with ``needle``, once it is written."""
        async with asyncio.timeout(timeout):
            while True:
                self._said.clear()
                found = [line for line in self.lines if needle in line]
                if found:
                    return found[0]
                if self._reader is not None and self._reader.done():
                    raise AssertionError(f"the worker ended without saying {needle!r}")
                await self._said.wait()

    async def ended(self) -> int:
        """Its exit code, once it has ended and its log is read to the end."""
        code = await self.process.wait()
        if self._reader is not None:
            await self._reader
        return code

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.terminate()
        await self.ended()


@dataclass
class NatsBot:
    """NATS, the scripted model and Slack, and the config of a bot whose agents run on
    workers (``harness bot`` and ``harness worker`` processes started by the test)."""

    nats: NatsServer
    model: ScriptedModel
    slack: SlackEmulator
    config: Path
    env: dict[str, str]
    folder: Path

    async def worker(self, url: str | None = None, name: str = "w1") -> WorkerProcess:
        """A worker reaching NATS at ``url`` (default: the server), with the workspaces
        folder of every worker of that name."""
        process = await start_worker(
            name, url or self.nats.url, worker_env(self.model.env()), self.folder
        )
        return WorkerProcess(process)

    def said(self, channel: str, ts: str, needle: str) -> list[str]:
        """The bot's messages in the thread that contain ``needle``."""
        texts = [message_text(m) for m in self.slack.thread(channel, ts) if m.get("bot_id")]
        return [text for text in texts if needle in text]

    async def until_said(self, channel: str, ts: str, needle: str) -> list[str]:
        return await self.slack.wait_for(lambda: self.said(channel, ts, needle) or None, WAIT)

    def dispatches(self) -> list[dict[str, object]]:
        """Every dispatch as task.json holds it."""
        return stored_dispatches(load_project(self.config).config.tasks_dir)


@contextlib.asynccontextmanager
async def nats_bot(
    project_dir: Path, folder: Path, script: Script, *, lost_after: float
) -> AsyncIterator[NatsBot]:
    async with (
        NatsServer(folder / "nats") as nats,
        ScriptedModel(script) as model,
        SlackEmulator(signing_secret=SECRET, bot_token=BOT_TOKEN) as slack,
    ):
        config = project_dir / "config.yaml"
        with config.open("a", encoding="utf-8") as file:
            file.write(
                f"\nruntime: {{kind: nats, url: '{nats.url}', lostAfterSeconds: {lost_after}}}\n"
            )
        env = {
            **worker_env({}),
            "SLACK_BOT_TOKEN": BOT_TOKEN,
            "SLACK_SIGNING_SECRET": SECRET,
            "SLACK_API_URL": slack.api_url,
        }
        yield NatsBot(nats, model, slack, config, env, folder)


Mode = Literal["http", "socket"]
BOT_ARGS: dict[Mode, tuple[str, ...]] = {
    "http": ("--mode", "http", "--port", "0"),
    "socket": ("--mode", "socket"),
}


@dataclass(frozen=True)
class Replicas:
    """``harness bot`` replicas on one config, started one after the other (in Socket Mode
    the emulator's connection ``i`` is ``bots[i]``'s), and the worker their agents run on."""

    bots: tuple[ClockedBot, ...]
    worker: WorkerProcess


@contextlib.asynccontextmanager
async def replicas(
    c: NatsBot,
    n: int = 2,
    *,
    mode: Mode = "http",
    store: str | None = "replicas",
    env: Mapping[str, str] | None = None,
    clock: Path | None = None,
) -> AsyncIterator[Replicas]:
    """A worker, then ``n`` replicas of the bot on ``c``'s config in ``mode``, on ``clock``'s
    time (None: the real time), with ``env`` on top of ``c.env``. ``store``: the prefix of
    the thread store on NATS that makes them replicas (None: only the runtime is on NATS).
    At the end each bot the test did not stop is killed, then the worker is stopped: no
    process is left."""
    if store is not None:
        with c.config.open("a", encoding="utf-8") as file:
            file.write(f"\nstore: {{kind: nats, prefix: {store}}}\n")
    socket = {"SLACK_APP_TOKEN": "xapp-emulator"} if mode == "socket" else {}
    bot_env = {**c.env, **socket, **(env or {})}
    worker = await c.worker()
    try:
        async with contextlib.AsyncExitStack() as stack:
            bots = [
                await stack.enter_async_context(
                    clocked_bot(c.config, c.slack, bot_env, clock, bot_args=BOT_ARGS[mode])
                )
                for _ in range(n)
            ]
            yield Replicas(tuple(bots), worker)
    finally:
        await worker.stop()
