"""The Slack bot: ack latency under a burst, and Slack message -> result against bare query().

The bot runs as people run it, ``harness bot --mode http`` with the shipped config and roles,
against our Slack emulator on loopback; its agents are the real Claude Code CLI talking to
the scripted model. Emulator and model serve from their own threads; the measuring client
is this process's main loop.

  ack:     a burst of 50 signed event POSTs (50 DMs, each starting a task) sent at once, on
           an idle bot; latency of each = POST sent -> HTTP 200 (p50 / p99 / max)
  result:  a DM -> its result posted in the thread, against a bare
           ``claude_agent_sdk.query()`` on the same scripted model; alternating runs

Usage: .venv/bin/python bench/slack.py [--burst 50] [--runs 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from asyncio.subprocess import PIPE
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from common import bare_query, copy_project, summary

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bot.slack_emulator import DeliveredEvent, SlackEmulator  # noqa: E402
from harness.scripted_model import ModelRequest, ScriptedModel, Turn  # noqa: E402

FINAL = {"white_check_mark", "x"}
BURST_CLIENT = """
import asyncio, json, sys, time
import aiohttp
from bot.slack_emulator_model import sign

async def main(job):
    async with aiohttp.ClientSession() as session:
        async def post(body):
            stamp = str(int(time.time()))
            headers = {"Content-Type": "application/json", "X-Slack-Request-Timestamp": stamp,
                       "X-Slack-Signature": sign(job["secret"], stamp, body.encode())}
            started = time.perf_counter()
            async with session.post(job["url"], data=body, headers=headers) as response:
                await response.read()
                assert response.status == 200, response.status
            return time.perf_counter() - started
        await (await session.get(job["url"].replace("/slack/events", "/healthz"))).read()
        print(json.dumps(await asyncio.gather(*(post(b) for b in job["bodies"]))))

asyncio.run(main(json.load(sys.stdin)))
"""
T = TypeVar("T")


def script(request: ModelRequest) -> Turn:
    return Turn.finish("done", ["a change"])


def percentile(samples: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(samples)
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def on(slack: SlackEmulator, coro: Coroutine[Any, Any, T]) -> T:
    """Runs a coroutine on the emulator's own loop (it serves from a thread)."""
    return await asyncio.to_thread(slack.call, coro, 300.0)


async def slack_result(slack: SlackEmulator, n: int) -> float:
    """A DM -> the bot's result in its thread (the status message edited into it)."""
    channel = f"DRUN{n}"
    started = time.perf_counter()
    sent = await on(slack, slack.user_message(f"URUN{n}", channel, f"bench run {n}"))
    ts = sent.event["ts"]

    def result_posted() -> bool:
        return any(
            "finished" in str(m.get("text")) for m in slack.thread(channel, ts) if m.get("bot_id")
        )

    await on(slack, slack.wait_for(result_posted, 60))
    elapsed = time.perf_counter() - started
    await on(slack, slack.wait_for(ended(slack, channel, ts), 60))
    return elapsed


async def burst(slack: SlackEmulator, size: int) -> list[float]:
    """Stores ``size`` DMs in the emulator, then POSTs their signed events all at once."""
    slack.delivery = "none"
    stored: list[DeliveredEvent] = [
        await on(slack, slack.user_message(f"UB{n}", f"DB{n}", f"burst request {n}"))
        for n in range(size)
    ]
    slack.delivery = "http"
    bodies = [json.dumps({**d.payload, "event_id": f"EvBURST{n}"}) for n, d in enumerate(stored)]
    job = {"url": slack.bot_url, "secret": slack.identity.signing_secret, "bodies": bodies}
    # The client is a process of its own, so its timing shares no GIL with the emulator.
    client = await asyncio.create_subprocess_exec(
        sys.executable, "-c", BURST_CLIENT, cwd=REPO, stdin=PIPE, stdout=PIPE
    )
    out, _ = await client.communicate(json.dumps(job).encode())
    latencies: list[float] = json.loads(out)
    for n, delivered in enumerate(stored):  # every run of the burst ends before we go on
        await on(slack, slack.wait_for(ended(slack, f"DB{n}", delivered.event["ts"]), 300))
    return latencies


def ended(slack: SlackEmulator, channel: str, ts: str) -> Callable[[], set[str]]:
    return lambda: slack.reactions(channel, ts) & FINAL


async def measure(slack: SlackEmulator, model: ScriptedModel, args: argparse.Namespace) -> None:
    await bare_query(model.env(), "warm-up")
    await slack_result(slack, -1)  # warm-up: auth.test, the first CLI start
    harness_times, bare_times = [], []
    for n in range(args.runs):
        harness_times.append(await slack_result(slack, n))
        bare_times.append(await bare_query(model.env(), f"bench run {n}"))
    print(summary("Slack DM -> result posted", harness_times))
    print(summary("bare query()", bare_times))
    ratio = statistics.median(harness_times) / statistics.median(bare_times)
    print(f"ratio Slack / bare (medians): {ratio:.3f}  (aim <= 1.05)")

    ms = [a * 1000 for a in await burst(slack, args.burst)]
    print(
        f"ack latency, burst of {args.burst} signed event POSTs: p50 {percentile(ms, 50):.1f} ms"
        f"  p99 {percentile(ms, 99):.1f} ms  max {max(ms):.1f} ms  (aim p99 <= 50 ms)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst", type=int, default=50)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        copy_project(project)
        slack = SlackEmulator()
        with ScriptedModel.in_thread(script) as model, slack.in_thread():
            port = free_port()
            env = {
                **{k: v for k, v in os.environ.items() if not k.startswith("SLACK_")},
                **model.env(),
                "SLACK_BOT_TOKEN": slack.identity.bot_token,
                "SLACK_SIGNING_SECRET": slack.identity.signing_secret,
                "SLACK_API_URL": slack.api_url,
            }
            command = [sys.executable, "-m", "harness", "bot", "--mode", "http", "--port",
                       str(port), "--config", str(project / "config.yaml")]  # fmt: skip
            bot = subprocess.Popen(command, env=env, cwd=REPO, stderr=subprocess.PIPE)
            assert bot.stderr is not None
            try:
                while b"listening on" not in (banner := bot.stderr.readline()):
                    assert banner, "the bot exited before it listened"
                slack.bot_url = f"http://127.0.0.1:{port}/slack/events"
                asyncio.run(measure(slack, model, args))
            finally:
                bot.terminate()
                bot.communicate(timeout=60)


if __name__ == "__main__":
    main()
