"""The deploy files' services as processes here: started with their log read as it comes,
waited on by what they say, stopped with SIGTERM as an engine or systemd stops them."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path

from bot.testing.slack_emulator import SlackEmulator
from tests.bot.conftest import message_text

WAIT = 60.0


class Service:
    """A service's process, its standard error read as it comes (kept for the asserts)."""

    def __init__(self, name: str, process: asyncio.subprocess.Process) -> None:
        self.name = name
        self.process = process
        self.said: list[str] = []
        self._seen = asyncio.Event()  # a line came, or the end
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self.process.stderr is not None
        try:
            while line := await self.process.stderr.readline():
                self.said.append(line.decode(errors="replace"))
                self._seen.set()
        finally:
            self._seen.set()

    async def says(self, text: str) -> str:
        """The first line of its log holding ``text``, once it comes."""

        async def found() -> str:
            while True:
                lines = [line for line in self.said if text in line]
                if lines:
                    return lines[0]
                assert not self._reader.done(), f"{self.name} exited:\n{self.log()}"
                self._seen.clear()
                await self._seen.wait()

        return await asyncio.wait_for(found(), WAIT)

    def log(self) -> str:
        return "".join(self.said[-40:])

    async def stop(self) -> int:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(self.process.wait(), WAIT)
        await self._reader
        return code


@contextlib.asynccontextmanager
async def started(
    name: str, args: Sequence[str], env: Mapping[str, str], cwd: Path
) -> AsyncIterator[Service]:
    process = await asyncio.create_subprocess_exec(
        *args,
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    service = Service(name, process)
    try:
        yield service
    finally:
        if process.returncode is None:
            process.kill()
        await service.stop()


def machine_env() -> dict[str, str]:
    """The machine's own environment (no Slack, model or harness variable of this process's),
    with the virtualenv's bin first on PATH, as /opt/harness/bin is in the image."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SLACK_", "ANTHROPIC_", "HARNESS_", "CLAUDE_"))
    }
    return {**env, "PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '')}"}


async def answered(slack: SlackEmulator, text: str) -> str:
    """A DM of ``text`` from U1, once its thread has the bot's finished answer: the thread."""
    sent = await slack.user_message("U1", "D1", text)
    ts = sent.event["ts"]
    await slack.wait_for(lambda: "white_check_mark" in slack.reactions("D1", ts) or None, WAIT)
    return "\n".join(message_text(message) for message in slack.thread("D1", ts))
