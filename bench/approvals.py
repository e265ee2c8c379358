"""Approvals in Slack: from an agent's tool call that needs approval to the question in the thread.

The real Bolt app (HTTP mode) against our Slack emulator, the real Claude Code CLI against the
scripted model, all in this process on loopback. Each run is a DM whose developer runs a
command that needs a human's approval (`git push -h`: its role does not allow it, and the
sandbox asks for any push); the time is measured from the moment the scripted model
hands the CLI that tool call to the moment the emulator stores the question in the thread.
The approval is then given by a click, and the run must finish.

Usage: .venv/bin/python bench/approvals.py [--runs 10]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import copy_project, serve_bot

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bot.settings import BotOptions  # noqa: E402
from bot.testing.slack_emulator import SlackEmulator  # noqa: E402
from harness.project import build_orchestrator, load_project  # noqa: E402
from harness.runtime.claude import ClaudeRuntime  # noqa: E402
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn  # noqa: E402

handed: dict[str, float] = {}  # prompt -> when the tool call left the model


def script(request: ModelRequest) -> Turn:
    prompt = request.first_user_text.strip().splitlines()[-1]
    if not request.all_tool_results:
        handed[prompt] = time.perf_counter()
        return Turn.call("Bash", command="git push -h")
    return Turn.finish("ran it")


async def one_run(slack: SlackEmulator, n: int) -> float:
    channel = f"DAPP{n}"
    sent = await slack.user_message(f"UAPP{n}", channel, f"check the version {n}")
    ts = sent.event["ts"]

    def question() -> dict[str, object] | None:
        found = [m for m in slack.thread(channel, ts) if "asks to run" in str(m.get("text"))]
        return found[0] if found else None

    asked = await slack.wait_for(question, 60)
    seen = time.perf_counter()
    elapsed = seen - handed[f"check the version {n}"]
    blocks = asked.get("blocks") or []
    [actions] = [b for b in blocks if isinstance(b, dict) and b.get("type") == "actions"]
    allow = actions["elements"][0]
    await slack.block_action(
        f"UAPP{n}", channel, str(asked["ts"]), allow["action_id"], allow["value"], thread_ts=ts
    )
    await slack.wait_for(lambda: "white_check_mark" in slack.reactions(channel, ts), 60)
    return elapsed


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = copy_project(Path(tmp))
        async with ScriptedModel(script) as model, SlackEmulator() as slack:
            orchestrator = build_orchestrator(
                load_project(config), ClaudeRuntime(base_env=model.env())
            )
            server = await serve_bot(slack, orchestrator, BotOptions(status_interval=2.5))
            try:
                await one_run(slack, -1)  # warm-up: auth.test, the first CLI start
                samples = [await one_run(slack, n) for n in range(args.runs)]
            finally:
                await server.stop()
    print(
        f"tool call -> approval question in the thread: median "
        f"{statistics.median(samples) * 1000:.1f} ms  min {min(samples) * 1000:.1f}  "
        f"max {max(samples) * 1000:.1f}  (n={len(samples)})"
    )


if __name__ == "__main__":
    asyncio.run(main())
