"""The Slack bot: Slack message -> result against bare query(), and ack latency while agents run.

The bot runs as people run it, ``harness bot --mode http`` with the shipped config and roles
(its log in a file, as ``--log-file`` writes it), against our Slack emulator on loopback; its
agents are the real Claude Code CLI talking to the scripted model. Emulator and model serve
from threads of this process; the events of an ack measurement are sent by a client process
of its own.

  result:  a DM -> its result posted in the thread, against a bare
           ``claude_agent_sdk.query()`` on the same scripted model; alternating runs
  ack:     a fresh bot with 4 agents running (each CLI waits on a model turn that stalls),
           then 200 signed event POSTs; latency of each = request written -> HTTP 200
           (p50 / p99 / max). Three ways, each on its own bot:
             burst    200 DMs at once, each starting a task (queued behind the 4 agents)
             chatter  200 channel messages at once, none addressed to the bot (ignored)
             stream   200 DMs at --rate per second, each starting a task

Usage: .venv/bin/python bench/slack.py [--runs 10] [--busy 4] [--events 200] [--rate 100]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from asyncio.subprocess import PIPE
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from common import bare_query, copy_project, free_port, percentile, summary

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bot.testing.slack_emulator import DeliveredEvent, SlackEmulator  # noqa: E402
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn  # noqa: E402

FINAL = {"white_check_mark", "x"}
BUSY = "busy job"
# A client light enough not to be what is measured: plain HTTP/1.1 over asyncio streams, every
# request built and signed and every connection opened before the first is sent; latency =
# request written -> status line read. With a rate, request n goes out n / rate s after the
# first; without, all at once.
EVENT_CLIENT = """
import asyncio, json, sys, time
from urllib.parse import urlsplit
from bot.testing.slack_model import sign

def request(url, secret, body):
    stamp = str(int(time.time()))
    head = (f"POST {url.path} HTTP/1.1\\r\\nHost: {url.netloc}\\r\\n"
            f"Content-Type: application/json\\r\\nContent-Length: {len(body)}\\r\\n"
            f"X-Slack-Request-Timestamp: {stamp}\\r\\n"
            f"X-Slack-Signature: {sign(secret, stamp, body)}\\r\\n\\r\\n")
    return head.encode() + body

async def post(n, rate, conn, data):
    reader, writer = conn
    if rate:
        await asyncio.sleep(n / rate)
    started = time.perf_counter()
    writer.write(data)
    status = await reader.readline()
    elapsed = time.perf_counter() - started
    assert status.split()[1] == b"200", status
    writer.close()
    return elapsed

async def main(job):
    # Event n goes to urls[n % len(urls)], as a load balancer spreads them over replicas.
    urls = [urlsplit(url) for url in job.get("urls") or [job["url"]]]
    to = [urls[n % len(urls)] for n in range(len(job["bodies"]))]
    datas = [request(url, job["secret"], body.encode()) for url, body in zip(to, job["bodies"])]
    conns = await asyncio.gather(
        *(asyncio.open_connection(url.hostname, url.port) for url in to))
    posts = (post(n, job["rate"], c, d) for n, (c, d) in enumerate(zip(conns, datas)))
    print(json.dumps(await asyncio.gather(*posts)))

asyncio.run(main(json.load(sys.stdin)))
"""
T = TypeVar("T")


@dataclass(frozen=True)
class Scenario:
    tag: str  # names its users, channels and event ids apart from the other scenarios'
    title: str
    dms: bool  # a DM per event (each starts a task), else messages in one channel
    rate: float  # events per second; 0 sends them all at once
    logged: str  # the decision the bot's log must show for each event


def script(request: ModelRequest) -> Turn:
    if BUSY in request.first_user_text:
        return Turn(stall_seconds=600)  # ended by the bot's shutdown
    return Turn.finish("done", ["a change"])


async def on(slack: SlackEmulator, coro: Coroutine[Any, Any, T]) -> T:
    """Runs a coroutine on the emulator's own loop (it serves from a thread)."""
    return await asyncio.to_thread(slack.call, coro, 300.0)


def ended(slack: SlackEmulator, channel: str, ts: str) -> Callable[[], set[str]]:
    return lambda: slack.reactions(channel, ts) & FINAL


def seen(slack: SlackEmulator, channel: str, ts: str) -> Callable[[], bool]:
    return lambda: "eyes" in slack.reactions(channel, ts)


@dataclass(frozen=True)
class RunningBot:
    pid: int
    log: Path


@contextlib.contextmanager
def running_bot(
    folder: Path,
    slack: SlackEmulator,
    model: ScriptedModel,
    extra: str = "",
    replace: tuple[str, str] = ("", ""),
) -> Iterator[RunningBot]:
    """``harness bot --mode http`` on a fresh copy of the project, ``extra`` added to its
    config.yaml (keys it does not have: a key written twice is refused) and ``replace``'s
    first text replaced by its second; its pid and log file."""
    folder.mkdir()
    config = copy_project(folder)
    text = config.read_text(encoding="utf-8").replace(*replace) if replace[0] else None
    config.write_text((text or config.read_text(encoding="utf-8")) + extra, encoding="utf-8")
    port, log = free_port(), folder / "bot.log"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SLACK_")},
        **model.env(),
        "SLACK_BOT_TOKEN": slack.identity.bot_token,
        "SLACK_SIGNING_SECRET": slack.identity.signing_secret,
        "SLACK_API_URL": slack.api_url,
    }
    # The log goes to a file: a pipe nobody reads while events pour in would fill and stall
    # the bot.
    command = [sys.executable, "-m", "harness", "bot", "--mode", "http", "--port", str(port),
               "--config", str(config), "--log-file", str(log)]  # fmt: skip
    bot = subprocess.Popen(command, env=env, cwd=REPO, stderr=subprocess.PIPE)
    assert bot.stderr is not None
    try:
        while b"listening on" not in (banner := bot.stderr.readline()):
            assert banner, "the bot exited before it listened"
        slack.bot_url = f"http://127.0.0.1:{port}/slack/events"
        yield RunningBot(bot.pid, log)
    except BaseException:
        # The temporary folder goes with the bench: what the bot logged is shown here.
        if log.exists():
            tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-40:]
            print("the bot's log, last lines:", *tail, sep="\n", file=sys.stderr)
        raise
    finally:
        bot.terminate()
        bot.communicate(timeout=120)


async def slack_result(slack: SlackEmulator, n: int) -> float:
    """A DM -> the bot's result in its thread (the status message edited into it)."""
    channel = f"DRUN{n}"
    started = time.perf_counter()
    sent = await on(slack, slack.user_message(f"URUN{n}", channel, f"bench run {n}"))
    ts = sent.event["ts"]

    def result_posted() -> bool:
        # The result closes the streamed reply (chat.stopStream's blocks), whose text stays
        # the stream's header; without streaming it is the status message, edited.
        return any(
            "* finished" in json.dumps(m) for m in slack.thread(channel, ts) if m.get("bot_id")
        )

    await on(slack, slack.wait_for(result_posted, 60))
    elapsed = time.perf_counter() - started
    await on(slack, slack.wait_for(ended(slack, channel, ts), 60))
    return elapsed


async def measure_results(slack: SlackEmulator, model: ScriptedModel, runs: int) -> None:
    await bare_query(model.env(), "warm-up")
    await slack_result(slack, -1)  # warm-up: auth.test, the first CLI start
    harness_times, bare_times = [], []
    for n in range(runs):
        harness_times.append(await slack_result(slack, n))
        bare_times.append(await bare_query(model.env(), f"bench run {n}"))
    print(summary("Slack DM -> result posted", harness_times))
    print(summary("bare query()", bare_times))
    ratio = statistics.median(harness_times) / statistics.median(bare_times)
    print(f"ratio Slack / bare (medians): {ratio:.3f}  (aim <= 1.05)")


async def keep_busy(slack: SlackEmulator, model: ScriptedModel, tag: str, count: int) -> None:
    """``count`` DMs whose agents stay running: returns once each CLI waits on the model."""
    for n in range(count):
        await on(slack, slack.user_message(f"U{tag}BUSY{n}", f"D{tag}BUSY{n}", f"{BUSY} {tag}{n}"))
    for n in range(count):
        await model.wait_for_request(lambda r, n=n: f"{BUSY} {tag}{n}" in r.first_user_text, 60)


async def measure_acks(
    slack: SlackEmulator, model: ScriptedModel, scenario: Scenario, size: int, busy: int
) -> list[float]:
    """Seconds from each event's request written to its HTTP 200, with ``busy`` agents running."""
    await keep_busy(slack, model, scenario.tag, busy)
    tag = scenario.tag
    slack.delivery = "none"  # stored only: the client delivers them
    stored: list[DeliveredEvent] = []
    for n in range(size):
        channel = f"D{tag}{n}" if scenario.dms else f"C{tag}"
        stored.append(await on(slack, slack.user_message(f"U{tag}{n}", channel, f"request {n}")))
    slack.delivery = "http"
    bodies = [json.dumps({**d.payload, "event_id": f"Ev{tag}{n}"}) for n, d in enumerate(stored)]
    secret = slack.identity.signing_secret
    job = {"url": slack.bot_url, "secret": secret, "bodies": bodies, "rate": scenario.rate}
    client = await asyncio.create_subprocess_exec(
        sys.executable, "-c", EVENT_CLIENT, cwd=REPO, stdin=PIPE, stdout=PIPE
    )
    out, _ = await client.communicate(json.dumps(job).encode())
    if scenario.dms:  # each request was taken in: 👀 on every DM
        for n, delivered in enumerate(stored):
            await on(slack, slack.wait_for(seen(slack, f"D{tag}{n}", delivered.event["ts"]), 60))
    latencies: list[float] = json.loads(out)
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="DM -> result runs")
    parser.add_argument("--busy", type=int, default=4, help="agents running during the acks")
    parser.add_argument("--events", type=int, default=200, help="events per ack measurement")
    parser.add_argument("--rate", type=float, default=100.0, help="events per second (stream)")
    args = parser.parse_args()
    n, rate = args.events, args.rate
    new, chatter = "new task", "ignored: top-level channel message without a mention"
    scenarios = (
        Scenario("BURST", f"burst of {n} DMs at once, each a new task", True, 0, new),
        Scenario("CHAT", f"burst of {n} channel messages at once, all ignored", False, 0, chatter),
        Scenario("STREAM", f"{n} DMs at {rate:g}/s, each a new task", True, rate, new),
    )
    slack = SlackEmulator()
    print(f"load average at the start: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    with (
        tempfile.TemporaryDirectory() as tmp,
        ScriptedModel.in_thread(script) as model,
        slack.in_thread(),
    ):
        if args.runs:
            with running_bot(Path(tmp, "results"), slack, model):
                asyncio.run(measure_results(slack, model, args.runs))
        for scenario in scenarios:
            with running_bot(Path(tmp, scenario.tag), slack, model) as bot:
                seconds = asyncio.run(measure_acks(slack, model, scenario, n, args.busy))
            ms = [s * 1000 for s in seconds]
            # Every event was handled, and as intended: the bot's request log says so.
            pattern = rf" from U{scenario.tag}\d+ in \w+: {re.escape(scenario.logged)} \("
            logged = len(re.findall(pattern, bot.log.read_text("utf-8")))
            print(
                f"ack latency, {scenario.title}, {args.busy} agents running: "
                f"p50 {percentile(ms, 50):.1f} ms  p99 {percentile(ms, 99):.1f} ms  "
                f"max {max(ms):.1f} ms  (aim p99 < 50 ms); logged {logged}/{n}"
            )
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
