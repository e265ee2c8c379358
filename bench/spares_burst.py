"""A burst with and without spares: 200 DMs in 2 s against the real bot, each a new task,
with ``mcp.maxConcurrentAgents: 4``, once with the shipped spares (one of the default role,
``followUpSpares: 1``) and once with none (``spares: {}``, ``followUpSpares: 0``), in the
same run, alternating when ``--runs`` > 1.

The bot runs as people run it (``harness bot --mode http``, the shipped config and roles)
against the Slack emulator on loopback; its agents are the real Claude Code CLI in its
sandbox, talking to the scripted model (each answers at once). The signed events are sent
by a client process of their own (``slack.py``'s), 100 a second. Reported for each: the
time from the first event sent to the last thread answered, how many threads got exactly one
result (and a final reaction), the most ``claude`` processes below the bot at once and how
many it started in all (sampled every 50 ms from /proc), and, from the bot's log, the spares
made and served once the burst began.

Usage: .venv/bin/python bench/spares_burst.py [--dms 200] [--seconds 2] [--runs 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
import time
from asyncio.subprocess import PIPE
from dataclasses import dataclass
from pathlib import Path

from slack import EVENT_CLIENT, FINAL, on, running_bot

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bot.testing.slack_emulator import DeliveredEvent, SlackEmulator  # noqa: E402
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn  # noqa: E402

SLOTS = 4
NO_SPARES = "\nspares: {}\nfollowUpSpares: 0\n"


def script(request: ModelRequest) -> Turn:
    return Turn.finish("done", ["a change"])


@dataclass(frozen=True)
class Burst:
    label: str
    seconds: float  # first event sent -> last thread answered
    answered_once: int
    peak_claude: int
    peak_working: int  # claude processes less the spares configured
    cpu_seconds: float  # CPU time of the bot and every process below it (user + system)
    cpu_by_name: dict[str, float]
    load: float  # the machine's load average (1 min) when it started: others' work too
    claude_started: int  # distinct ``claude`` processes seen below the bot
    spares_made: int  # spares (new tasks' and follow-ups') ready after the burst began
    spares_served: int  # agents started on a spare


class Peak:
    """The most ``claude`` processes below ``root`` at once, and the CPU time of every
    process below it (each one's last reading; what a process spent after the last sample
    is missed), sampled from /proc."""

    def __init__(self, root: int) -> None:
        self.root, self.most = root, 0
        self.ticks: dict[tuple[int, int, str], int] = {}  # (pid, start, name) -> CPU ticks
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            count, ticks = below(self.root)
            self.most = max(self.most, count)
            self.ticks.update(ticks)

    @property
    def cpu_seconds(self) -> float:
        return sum(self.ticks.values()) / os.sysconf("SC_CLK_TCK")

    def claude_seen(self) -> int:
        return sum(1 for _, _, name in self.ticks if name == "claude")

    def cpu_by_name(self) -> dict[str, float]:
        """CPU seconds by process name (the bot is ``python``, the sandbox's bridge too)."""
        spent: dict[str, float] = {}
        for (pid, _, name), ticks in self.ticks.items():
            key = "bot" if pid == self.root else name
            spent[key] = spent.get(key, 0.0) + ticks / os.sysconf("SC_CLK_TCK")
        return spent


def claude_below(root: int) -> int:
    return below(root)[0]


def processes() -> tuple[dict[int, int], dict[int, str], dict[int, tuple[int, int]]]:
    """Every process now, from /proc: its parent, its name, and (start time, CPU ticks of
    user + system) of each one not a zombie."""
    parents: dict[int, int] = {}
    names: dict[int, str] = {}
    spent: dict[int, tuple[int, int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        pid = int(entry.name)
        names[pid] = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        if fields[0] != "Z":
            parents[pid] = int(fields[1])
            spent[pid] = (int(fields[19]), int(fields[11]) + int(fields[12]))
    return parents, names, spent


def below(root: int) -> tuple[int, dict[tuple[int, int, str], int]]:
    """How many ``claude`` processes are below ``root``, and the CPU ticks (user + system)
    of ``root`` and every process below it, by (pid, start time)."""
    parents, names, spent = processes()

    def under(pid: int) -> bool:
        up: int | None = pid
        while up and up != root and up != 1:
            up = parents.get(up)
        return up == root

    count = sum(1 for pid, name in names.items() if name == "claude" and under(pid))
    ticks = {
        (pid, spent[pid][0], names[pid]): spent[pid][1]
        for pid in spent
        if pid == root or under(pid)
    }
    return count, ticks


def results(slack: SlackEmulator, channel: str, ts: str) -> int:
    """The bot's results in the thread (``✅ *developer* finished``, in the blocks)."""
    return sum(
        1 for m in slack.thread(channel, ts) if m.get("bot_id") and "* finished" in json.dumps(m)
    )


async def burst(slack: SlackEmulator, tag: str, dms: int, seconds: float) -> tuple[float, int]:
    """``dms`` DMs over ``seconds``, each a new task: seconds to the last answer, and how
    many threads were answered exactly once."""
    slack.delivery = "none"  # stored only: the client delivers them
    stored: list[DeliveredEvent] = []
    for n in range(dms):
        stored.append(await on(slack, slack.user_message(f"U{tag}{n}", f"D{tag}{n}", f"do {n}")))
    slack.delivery = "http"
    bodies = [json.dumps({**d.payload, "event_id": f"Ev{tag}{n}"}) for n, d in enumerate(stored)]
    job = {
        "url": slack.bot_url,
        "secret": slack.identity.signing_secret,
        "bodies": bodies,
        "rate": dms / seconds,
    }
    started = time.perf_counter()
    client = await asyncio.create_subprocess_exec(
        sys.executable, "-c", EVENT_CLIENT, cwd=REPO, stdin=PIPE, stdout=PIPE
    )
    await client.communicate(json.dumps(job).encode())
    threads = [(f"D{tag}{n}", d.event["ts"]) for n, d in enumerate(stored)]

    def all_ended() -> bool:
        return all(slack.reactions(c, ts) & FINAL for c, ts in threads)

    # Its own bound, not ``on``'s: on a shared machine a burst can take more than 5 minutes.
    await asyncio.to_thread(slack.call, slack.wait_for(all_ended, 900), 960.0)
    elapsed = time.perf_counter() - started
    await asyncio.sleep(2)  # a second answer, were one sent, would be there by now
    once = sum(
        1
        for c, ts in threads
        if results(slack, c, ts) == 1 and "white_check_mark" in slack.reactions(c, ts)
    )
    return elapsed, once


def run(
    slack: SlackEmulator, model: ScriptedModel, tmp: Path, label: str, args: argparse.Namespace
) -> Burst:
    slots = ("  maxConcurrentAgents: 4\n", f"  maxConcurrentAgents: {SLOTS}\n")
    extra = ""
    spares = label == "spares on"
    if not spares:
        extra += NO_SPARES
    tag = label.replace(" ", "").upper() + str(len(list(tmp.iterdir())))
    load = os.getloadavg()[0]
    with running_bot(tmp / tag, slack, model, extra, slots) as bot, Peak(bot.pid) as peak:
        deadline = time.monotonic() + 120
        while spares and claude_below(bot.pid) < 1:  # the shipped spare is up, as in use
            assert time.monotonic() < deadline, "no spare started"
            time.sleep(0.1)
        began = bot.log.stat().st_size  # what the bot logged before the burst
        seconds, once = asyncio.run(burst(slack, tag, args.dms, args.seconds))
        with bot.log.open(encoding="utf-8", errors="replace") as log:
            log.seek(began)
            logged = log.read()
    cpu, by_name = peak.cpu_seconds, peak.cpu_by_name()
    configured = 2 if spares else 0  # one of the default role, one follow-up
    made = logged.count("agent is ready") + logged.count("a follow-up spare for")
    served = logged.count("starts on a spare")
    return Burst(
        label, seconds, once, peak.most, max(0, peak.most - configured), cpu, by_name, load,
        peak.claude_seen(), made, served,
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dms", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--runs", type=int, default=1, help="alternating pairs")
    args = parser.parse_args()
    slack = SlackEmulator()
    with (
        tempfile.TemporaryDirectory() as tmp,
        ScriptedModel.in_thread(script) as model,
        slack.in_thread(),
    ):
        for n in range(args.runs):
            order = ("spares on", "spares off") if n % 2 == 0 else ("spares off", "spares on")
            for label in order:
                got = run(slack, model, Path(tmp), label, args)
                print(
                    f"{got.label:<11} {args.dms} DMs in {args.seconds:g} s, "
                    f"maxConcurrentAgents {SLOTS}: all answered in {got.seconds:.1f} s, "
                    f"answered once {got.answered_once}/{args.dms}, "
                    f"peak claude processes {got.peak_claude}, CPU {got.cpu_seconds:.0f} s "
                    f"(load average at its start {got.load:.1f})",
                    flush=True,
                )
                top = sorted(got.cpu_by_name.items(), key=lambda kv: -kv[1])[:5]
                print(
                    f"  claude processes started {got.claude_started}, spares made during "
                    f"the burst {got.spares_made}, agents started on a spare {got.spares_served}"
                )
                print("  CPU by process: " + ", ".join(f"{k} {v:.0f} s" for k, v in top))


if __name__ == "__main__":
    main()
