"""``harness bot`` as people run it, for the benches: a process on one project folder and
port, started again after a stop, its log and standard error in files; and the processes it
started (its agents' CLIs), found and checked from /proc."""

from __future__ import annotations

import asyncio
import atexit
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from common import copy_project, free_port

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bot.testing.slack_emulator import SlackEmulator  # noqa: E402
from harness.testing.scripted_model import ScriptedModel  # noqa: E402

SECRET, TOKEN = "bench-signing-secret", "xoxb-bench"


def children(pid: int) -> set[int]:
    found: set[int] = set()
    for listing in Path(f"/proc/{pid}/task").glob("*/children"):
        found.update(int(p) for p in listing.read_text().split())
    return found


def alive(pids: set[int]) -> set[int]:
    """The processes among ``pids`` still running (zombies count as gone)."""
    running = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            running.add(pid)
    return running


async def until(predicate: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout} s")
        await asyncio.sleep(0.02)


class BotProcess:
    """``harness bot --mode http`` on one project folder and port, started again after a stop;
    each run logs to bot-<n>.log and bot-<n>.stderr in the folder."""

    def __init__(self, folder: Path, slack: SlackEmulator, model: ScriptedModel) -> None:
        folder.mkdir(parents=True)
        self.folder = folder
        self.config = copy_project(folder)
        self.port = free_port()
        self.runs = 0
        self.process: subprocess.Popen[bytes] | None = None
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
        env.pop("ANTHROPIC_API_KEY", None)
        self.env = {
            **env,
            **model.env(),
            "SLACK_BOT_TOKEN": TOKEN,
            "SLACK_SIGNING_SECRET": SECRET,
            "SLACK_API_URL": slack.api_url,
        }
        slack.bot_url = f"http://127.0.0.1:{self.port}/slack/events"
        atexit.register(self.kill)  # no bot left behind when the bench fails half-way

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def start(self) -> float:
        """Seconds until it listens."""
        self.runs += 1
        log = self.folder / f"bot-{self.runs}.log"
        err = self.folder / f"bot-{self.runs}.stderr"
        command = [sys.executable, "-m", "harness", "bot", "--mode", "http", "--host",
                   "127.0.0.1", "--port", str(self.port), "--config", str(self.config),
                   "--log-file", str(log)]  # fmt: skip
        started = time.perf_counter()
        with err.open("wb") as stderr:  # a file: nobody has to keep reading a pipe
            self.process = subprocess.Popen(
                command, env=self.env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=stderr
            )

        def listening() -> bool:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"the bot exited before it listened:\n{err.read_text()}")
            return "listening on" in err.read_text(errors="replace")

        await until(listening, 60, "the bot listening")
        return time.perf_counter() - started

    async def stop(self, sig: signal.Signals = signal.SIGTERM) -> float:
        """Seconds from the signal to the process gone (reaped: a zombie's pid would still
        look alive to the next start's crash recovery)."""
        assert self.process is not None
        started = time.perf_counter()
        self.process.send_signal(sig)
        await asyncio.to_thread(self.process.wait, 120)
        return time.perf_counter() - started

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def outputs(self) -> list[Path]:
        return sorted(self.folder.glob("bot-*.log")) + sorted(self.folder.glob("bot-*.stderr"))

    def tracebacks(self) -> list[str]:
        """Each traceback in the logs, with the line before it (what was logged)."""
        found = []
        for path in self.outputs():
            lines = path.read_text(errors="replace").splitlines()
            for n, line in enumerate(lines):
                if "Traceback" in line:
                    found.append(f"{path.name}: {lines[n - 1] if n else ''} | {line}")
        return found
