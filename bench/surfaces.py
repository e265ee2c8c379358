"""Slack's agent surfaces: the first visible sign of work, and the rate of a streamed reply.

The real Bolt app (HTTP mode) against our Slack emulator on loopback, in this process.

  first sign:  a burst of 50 DMs sent at once, each in its own assistant thread (a DM thread);
               per message, the time from the moment its event is sent to the first Web API
               call that shows the person something is happening: 👀 on the message or the
               thread's status line (`assistant.threads.setStatus`), whichever Slack gets
               first. The agents are held (no CLI): this is the bot's own path.
  streaming:   one agent (the real Claude Code CLI against the scripted model) that says
               something every 0.1 s for 40 turns; appendStream calls per second while it
               streams, against Slack's rate tier for the method.

Usage: .venv/bin/python bench/surfaces.py [--burst 50]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import copy_project

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bot.app import create_app  # noqa: E402
from bot.server import BotServer  # noqa: E402
from bot.settings import BotOptions, SlackEnv  # noqa: E402
from bot.testing.slack_emulator import SlackEmulator  # noqa: E402
from harness.project import build_orchestrator, load_project  # noqa: E402
from harness.runtime.claude import ClaudeRuntime  # noqa: E402
from harness.runtime.spec import AgentRuntime  # noqa: E402
from harness.testing.held_runtime import HeldRuntime  # noqa: E402
from harness.testing.model_turns import ToolCall  # noqa: E402
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn  # noqa: E402

TURNS = 40


async def script(request: ModelRequest) -> Turn:
    done = len(request.all_tool_results)
    if done < TURNS:
        await asyncio.sleep(0.1)
        return Turn(
            text=f"step {done}: looked at the files",
            tool_calls=(ToolCall("Glob", {"pattern": "*"}),),
        )
    return Turn.finish("done", text="all steps done")


async def serve(slack: SlackEmulator, config: Path, runtime: AgentRuntime) -> BotServer:
    orchestrator = build_orchestrator(load_project(config), runtime)
    env = SlackEnv(
        bot_token=slack.identity.bot_token,
        signing_secret=slack.identity.signing_secret,
        api_url=slack.api_url,
    )
    bot = create_app(orchestrator, env, options=BotOptions())
    server = BotServer(bot, "http", host="127.0.0.1", port=0)
    await server.start()
    slack.bot_url, slack.delivery = server.url, "http"
    return server


async def first_sign(config: Path, burst: int) -> None:
    held = HeldRuntime()
    async with SlackEmulator() as slack:
        server = await serve(slack, config, held)
        try:
            roots = [
                await slack.agent.assistant_thread_started(f"UB{n}", f"DB{n}") for n in range(burst)
            ]
            sent: dict[str, float] = {}

            async def send(n: int) -> None:
                channel, root = f"DB{n}", roots[n]
                sent[channel] = time.time()
                await slack.user_message(f"UB{n}", channel, f"job {n}", thread_ts=root)

            await asyncio.gather(*(send(n) for n in range(burst)))
            await held.wait_started(min(burst, 4), 60)
            signs: dict[str, float] = {}
            for call in slack.calls():
                if call.method not in ("reactions.add", "assistant.threads.setStatus"):
                    continue
                channel = str(call.params.get("channel") or call.params.get("channel_id"))
                if channel in sent and channel not in signs:
                    signs[channel] = call.time - sent[channel]
            held.release()
        finally:
            await server.stop()
    samples = sorted(signs.values())
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    p50 = statistics.median(samples)
    print(f"first sign of work, burst of {burst}: p50 {p50 * 1000:.0f} ms  p99 {p99 * 1000:.0f} "
          f"ms  max {samples[-1] * 1000:.0f} ms  (n={len(samples)})")  # fmt: skip


async def streaming(config: Path) -> None:
    async with ScriptedModel(script) as model, SlackEmulator() as slack:
        server = await serve(slack, config, ClaudeRuntime(base_env=model.env()))
        try:
            root = await slack.agent.assistant_thread_started("US", "DS")
            sent = await slack.user_message("US", "DS", "walk through the files", thread_ts=root)
            await slack.wait_for(
                lambda: "white_check_mark" in slack.reactions("DS", sent.event["ts"]), 120
            )
        finally:
            await server.stop()
    appends = [c for c in slack.calls("chat.appendStream") if c.ok]
    [start] = [c for c in slack.calls("chat.startStream") if c.ok]
    [stop] = slack.calls("chat.stopStream")
    seconds = stop.time - start.time
    gaps = [b.time - a.time for a, b in itertools.pairwise(appends)]
    limited = sum(1 for c in slack.calls("chat.appendStream") if c.status == 429)
    print(f"streaming: {len(appends)} appends over {seconds:.1f} s = "
          f"{len(appends) / seconds:.2f} per second; shortest gap {min(gaps):.2f} s; "
          f"429 answers: {limited}")  # fmt: skip


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--burst", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = copy_project(Path(tmp))
        await first_sign(config, args.burst)
        await streaming(config)


if __name__ == "__main__":
    asyncio.run(main())
