"""``harness bot --mode http`` with its task store on a small tmpfs that fills up and is freed
again: an agent that finishes meanwhile has its result in its thread, a request that comes
meanwhile is told why it waits and is handled once space returns, /readyz says which volume
is full and recovers, and the log has no traceback. Real processes: the bot in a mount
namespace of its own (so its tmpfs goes with it whatever happens to the test), the real CLI
against the scripted model, the Slack emulator."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest

from bot.testing.slack_emulator import SlackEmulator
from harness.testing.scripted_model import ModelRequest, Turn
from tests.bot.conftest import WAIT, bot_outside, free_port, message_text

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.subprocess]

NOT_RECORDED = "cannot record your request"


class HeldUntilReleased:
    """Requests saying "slow" are answered once ``release`` is set; the others at once."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def __call__(self, request: ModelRequest) -> Turn:
        asked = request.first_user_text.strip().splitlines()[-1]
        if "slow" in asked:
            await self.release.wait()
        return Turn.finish(f"Done: {asked}")


@dataclass(frozen=True)
class Volume:
    """A 4 MiB tmpfs on ``tasks``, mounted in a mount namespace of its own (kept by ``holder``,
    a ``sleep``): only processes started in it see it, and it is gone with them, whatever
    happens to the test."""

    holder: asyncio.subprocess.Process
    tasks: Path

    def enter(self, *command: str) -> tuple[str, ...]:
        return ("nsenter", "-t", str(self.holder.pid), "-m", "--", *command)

    async def run(self, *command: str, env: dict[str, str] | None = None) -> str:
        """Runs ``command`` where the tmpfs is; its output."""
        run = await asyncio.create_subprocess_exec(
            *self.enter(*command), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )
        out, _ = await asyncio.wait_for(run.communicate(), WAIT)
        return out.decode("utf-8", "replace")

    async def fill(self) -> None:
        # dd stops at ENOSPC: the volume is full to its last block.
        await self.run("sh", "-c", f"dd if=/dev/zero of={self.tasks}/.filler bs=64k; sync")

    async def free(self) -> None:
        await self.run("rm", "-f", f"{self.tasks}/.filler")


@contextlib.asynccontextmanager
async def tmpfs_volume(tasks: Path) -> AsyncIterator[Volume]:
    tasks.mkdir(parents=True, exist_ok=True)
    mount = 'mount -t tmpfs -o size=4m harness-test "$0" && echo mounted && exec sleep 600'
    holder = await asyncio.create_subprocess_exec(
        *("unshare", "-m", "--propagation", "private", "sh", "-c", mount, str(tasks)),
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert holder.stdout is not None
        said = await asyncio.wait_for(holder.stdout.readline(), WAIT)
        assert said == b"mounted\n", "the tmpfs could not be mounted"
        yield Volume(holder, tasks)
    finally:
        if holder.returncode is None:
            holder.kill()
        await holder.communicate()


@dataclass
class Bot:
    process: asyncio.subprocess.Process
    port: int
    log: list[str] = field(default_factory=list)

    async def readyz(self) -> tuple[int, str]:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{self.port}/readyz") as response,
        ):
            return response.status, await response.text()


@contextlib.asynccontextmanager
async def bot_on(
    volume: Volume, config: Path, slack: SlackEmulator, env: dict[str, str]
) -> AsyncIterator[Bot]:
    """``harness bot --mode http`` where the volume is, its log read as it comes; stopped with
    SIGTERM at the end (unless the test stopped it)."""
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        *volume.enter(sys.executable, "-m", "harness", "bot", "--mode", "http"),
        *("--port", str(port), "--config", str(config)),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    bot = Bot(process, port)
    listening = asyncio.Event()

    async def read_log() -> None:
        assert process.stderr is not None
        while line := await process.stderr.readline():
            bot.log.append(line.decode("utf-8", "replace"))
            if b"listening on" in line:
                listening.set()
        listening.set()  # it exited: said above

    reader = asyncio.ensure_future(read_log())
    try:
        await asyncio.wait_for(listening.wait(), WAIT)
        assert process.returncode is None, "".join(bot.log)
        slack.bot_url = f"http://127.0.0.1:{port}/slack/events"
        yield bot
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), WAIT)
            except TimeoutError:
                process.kill()
                await process.wait()
        await asyncio.wait_for(reader, WAIT)


def bot_texts(slack: SlackEmulator, channel: str, ts: str) -> list[str]:
    return [message_text(m) for m in slack.thread(channel, ts) if m.get("bot_id")]


def saying(slack: SlackEmulator, channel: str, ts: str, needle: str) -> list[str]:
    return [text for text in bot_texts(slack, channel, ts) if needle in text]


async def until_ready(bot: Bot, ready: bool) -> str:
    """Polls /readyz (bounded) until it says ``ready`` (or not); what it said."""
    deadline = asyncio.get_running_loop().time() + WAIT
    while True:
        status, text = await bot.readyz()
        if (status == 200) == ready:
            return text
        assert asyncio.get_running_loop().time() < deadline, f"/readyz still says: {text}"
        await asyncio.sleep(0.2)


async def test_a_full_task_store_loses_no_result_and_no_request_and_recovers_when_freed(
    project_dir: Path,
) -> None:
    script = HeldUntilReleased()
    config = project_dir / "config.yaml"
    tasks = project_dir / ".agents" / "tasks"
    async with bot_outside(script) as (model, slack, env):
        async with tmpfs_volume(tasks) as volume, bot_on(volume, config, slack, env) as bot:
            slow = (await slack.user_message("U1", "D1", "a slow job")).event["ts"]
            await model.wait_for_request(timeout=WAIT)  # its agent is at work
            assert (await bot.readyz())[0] == 200

            await volume.fill()
            not_ready = await until_ready(bot, ready=False)
            doctor = await volume.run(
                *(sys.executable, "-m", "harness", "doctor", "--config", str(config)), env=env
            )
            # A request while the disk is full: its person hears why nothing starts yet.
            quick = (await slack.user_message("U1", "D2", "a quick job")).event["ts"]
            await slack.wait_for(lambda: saying(slack, "D2", quick, NOT_RECORDED), WAIT)
            # The agent at work finishes meanwhile: its result reaches its thread all the same.
            script.release.set()
            await slack.wait_for(lambda: "white_check_mark" in slack.reactions("D1", slow), WAIT)

            await volume.free()
            # The waiting request is handled once space returns.
            await slack.wait_for(lambda: "white_check_mark" in slack.reactions("D2", quick), WAIT)
            await until_ready(bot, ready=True)
            done_slow = saying(slack, "D1", slow, "Done: a slow job")
            done_quick = saying(slack, "D2", quick, "Done: a quick job")
            notices = saying(slack, "D2", quick, NOT_RECORDED)
        log = "".join(bot.log)

    assert "full" in not_ready and str(tasks) in not_ready, not_ready
    [disk] = [line for line in doctor.splitlines() if "disk space" in line]
    assert f"the volume mounted at {tasks} is full" in disk, doctor
    assert len(done_slow) == 1, bot_texts(slack, "D1", slow)
    assert len(done_quick) == 1, bot_texts(slack, "D2", quick)
    assert len(notices) == 1
    assert "no space left" in notices[0].lower() or "full" in notices[0].lower()
    assert not saying(slack, "D1", slow, NOT_RECORDED)
    assert "Traceback" not in log, log


async def test_a_bot_restarted_on_a_full_task_store_starts_tells_each_thread_once_and_recovers(
    project_dir: Path,
) -> None:
    script = HeldUntilReleased()
    config = project_dir / "config.yaml"
    tasks = project_dir / ".agents" / "tasks"
    async with (
        bot_outside(script) as (model, slack, env),
        tmpfs_volume(project_dir / ".agents" / "tasks") as volume,
    ):
        async with bot_on(volume, config, slack, env) as first:
            slow = (await slack.user_message("U1", "D1", "a slow job")).event["ts"]
            await model.wait_for_request(timeout=WAIT)
            await volume.fill()
            first.process.send_signal(signal.SIGTERM)  # a deploy while the disk is full
            await asyncio.wait_for(first.process.wait(), WAIT)

        async with bot_on(volume, config, slack, env) as second:
            not_ready = await until_ready(second, ready=False)
            # The agent the stop cut short: its thread hears it, once, disk full or not.
            await slack.wait_for(lambda: saying(slack, "D1", slow, "interrupted"), WAIT)
            quick = (await slack.user_message("U1", "D2", "a quick job")).event["ts"]
            await slack.wait_for(lambda: saying(slack, "D2", quick, NOT_RECORDED), WAIT)

            await volume.free()
            await slack.wait_for(lambda: "white_check_mark" in slack.reactions("D2", quick), WAIT)
            await until_ready(second, ready=True)
            interrupted = saying(slack, "D1", slow, "interrupted")
            done_quick = saying(slack, "D2", quick, "Done: a quick job")
            notices = saying(slack, "D2", quick, NOT_RECORDED)
        logs = "".join(first.log + second.log)

    assert str(tasks) in not_ready, not_ready
    assert len(interrupted) == 1, bot_texts(slack, "D1", slow)
    assert len(done_quick) == 1, bot_texts(slack, "D2", quick)
    assert len(notices) == 1
    assert "Traceback" not in logs, logs


async def test_a_request_the_full_disk_kept_out_is_handled_once_after_the_bot_was_killed(
    project_dir: Path, tmp_path: Path
) -> None:
    script = HeldUntilReleased()
    script.release.set()
    config = project_dir / "config.yaml"
    async with (
        bot_outside(script) as (_model, slack, env),
        tmpfs_volume(project_dir / ".agents" / "tasks") as volume,
    ):
        env = {**env, "XDG_RUNTIME_DIR": str(tmp_path / "runtime")}
        (tmp_path / "runtime").mkdir(mode=0o700)
        async with bot_on(volume, config, slack, env) as first:
            await volume.fill()
            await until_ready(first, ready=False)
            asked = (await slack.user_message("U1", "D2", "a quick job")).event["ts"]
            await slack.wait_for(lambda: saying(slack, "D2", asked, NOT_RECORDED), WAIT)
            first.process.send_signal(signal.SIGKILL)  # before the disk frees
            await asyncio.wait_for(first.process.wait(), WAIT)

        await volume.free()
        async with bot_on(volume, config, slack, env) as second:
            await slack.wait_for(lambda: "white_check_mark" in slack.reactions("D2", asked), WAIT)
            done = saying(slack, "D2", asked, "Done: a quick job")
            notices = saying(slack, "D2", asked, NOT_RECORDED)
        logs = "".join(first.log + second.log)

    assert len(done) == 1, bot_texts(slack, "D2", asked)
    assert len(notices) == 1 and "please send it again" not in notices[0]
    assert list((tmp_path / "runtime").rglob("*.json")) == []  # its kept copy is gone
    assert "Traceback" not in logs, logs
