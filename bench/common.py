"""What the benchmarks share: the bare-SDK baseline, a scratch copy of the project, a summary,
a percentile and a free port."""

from __future__ import annotations

import contextlib
import json
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, query

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from harness.cli.scaffold import init_project  # noqa: E402
from harness.tasks.model import RESULT_SCHEMA  # noqa: E402


async def bare_query(env: dict[str, str], prompt: str) -> float:
    """Seconds for one bare ``query()`` run ending in a structured result: the baseline."""
    options = ClaudeAgentOptions(
        output_format={"type": "json_schema", "schema": RESULT_SCHEMA}, env=env
    )
    started = time.perf_counter()
    async for message in query(prompt=prompt, options=options):
        if isinstance(message, ResultMessage):
            assert message.structured_output, message
    return time.perf_counter() - started


# The scripted model in a process of its own: prints its env as JSON, serves until stdin ends.
_MODEL_PROCESS = """
import asyncio, json, sys
from harness.testing.scripted_model import ScriptedModel, Turn
async def main():
    async with ScriptedModel(lambda request: Turn.finish("done", ["a change"])) as model:
        print(json.dumps(model.env()), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
asyncio.run(main())
"""


@contextlib.contextmanager
def model_process() -> Iterator[dict[str, str]]:
    """The scripted model (each turn a structured result at once) served by a child process,
    so that a bench timing this process's CPU does not count the model's; its env."""
    with subprocess.Popen(
        [sys.executable, "-c", _MODEL_PROCESS], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        cwd=REPO, text=True,
    ) as process:  # fmt: skip
        assert process.stdin is not None and process.stdout is not None
        try:
            yield json.loads(process.stdout.readline())
        finally:
            process.stdin.close()
            process.wait(timeout=30)


def copy_project(folder: Path) -> Path:
    """The shipped config.yaml and roles/ in ``folder`` (so tasks land there); the config."""
    init_project(folder)
    return folder / "config.yaml"


def summary(name: str, samples: list[float]) -> str:
    return (
        f"{name:<30} median {statistics.median(samples):.3f} s  "
        f"min {min(samples):.3f}  max {max(samples):.3f}  (n={len(samples)})"
    )


def percentile(samples: list[float], p: float) -> float:
    """Nearest-rank percentile of ``samples`` (``p`` in 0-100)."""
    ordered = sorted(samples)
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


def free_port() -> int:
    """A TCP port free on loopback now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def serve_bot(slack: Any, orchestrator: Any, options: Any = None) -> Any:
    """The real Bolt app over ``orchestrator``, serving ``slack`` (the emulator) in HTTP
    mode, started; stop it with ``await server.stop()``."""
    from bot.app import create_app
    from bot.server import BotServer
    from bot.settings import BotOptions, SlackEnv

    identity = slack.identity
    env = SlackEnv(bot_token=identity.bot_token, signing_secret=identity.signing_secret,
                   api_url=slack.api_url)  # fmt: skip
    bot = create_app(orchestrator, env, options=options or BotOptions(stream_replies=False))
    server = BotServer(bot, "http", host="127.0.0.1", port=0)
    await server.start()
    slack.bot_url, slack.delivery = server.url, "http"
    return server
