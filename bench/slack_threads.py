"""What a bench reads of a Slack thread in the emulator (each DM's outcome: a result, an
interruption notice, a refusal, nothing) and how it delivers DMs to the bot as Slack does
(again until acked, every attempt timed)."""

from __future__ import annotations

import asyncio
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.testing.slack_emulator import DeliveredEvent, SlackEmulator
from bot.testing.slack_model import message_text

FINAL = {"white_check_mark", "x"}  # the reactions that end a DM
JSON = dict[str, Any]


def has_rerun_button(message: JSON) -> bool:
    return any(
        element.get("text", {}).get("text") == "Run again"
        for block in message.get("blocks") or []
        if block.get("type") == "actions"
        for element in block.get("elements", [])
    )


@dataclass
class Outcome:
    kind: str  # result / interrupted / not started / other / none
    messages: int = 0  # outcome messages in the thread (1 unless something was settled twice)
    button: bool = False  # an interruption notice with its Run again button
    stale: list[str] = field(default_factory=list)  # status messages left "working…"/"queued…"
    wrong_job: bool = False  # a result quoting another thread's job
    text: str = ""  # the outcome message, or all the bot said in the thread when none
    reactions: set[str] = field(default_factory=set)  # on the person's message


def outcome(slack: SlackEmulator, job: int, ts: str) -> Outcome:
    channel = f"D{job}"
    messages = [m for m in slack.thread(channel, ts) if m.get("bot_id")]
    kinds: list[tuple[str, JSON]] = []
    for message in messages:
        text = message_text(message)
        header = text.split("\n", 1)[0]
        if header.startswith("✅") and "finished" in header:
            kinds.append(("result", message))
        elif "was interrupted" in header:
            kinds.append(("interrupted", message))
        elif "did not start on this" in text or "shutting down" in text:
            kinds.append(("not started", message))
        elif header.startswith("❌"):
            kinds.append(("other", message))
    stale = [
        message_text(m)
        for m in messages
        if "is working…" in message_text(m) or "is queued…" in message_text(m)
    ]
    reactions = slack.reactions(channel, ts)
    if not reactions & FINAL or not kinds:
        said = " / ".join(message_text(m) for m in messages)
        return Outcome("none", len(kinds), stale=stale, text=said, reactions=reactions)
    kind, message = kinds[-1]
    text = message_text(message)
    quoted = re.findall(r"Done: job (\d+)", text)
    return Outcome(
        kind,
        len(kinds),
        button=kind == "interrupted" and has_rerun_button(message),
        stale=stale,
        wrong_job=kind == "result" and quoted != [str(job)],
        text=text,
        reactions=reactions,
    )


@dataclass
class Attempt:
    job: int
    status: int | None  # None: no answer (the bot was down)
    seconds: float  # request sent -> answer (or failure)
    sent: float  # epoch seconds


@dataclass
class Deliveries:
    """Each job's DM, delivered until the bot acked it ``wanted`` times; every attempt timed."""

    slack: SlackEmulator
    wanted: int = 2
    attempts: list[Attempt] = field(default_factory=list)
    last: dict[int, DeliveredEvent] = field(default_factory=dict)
    ts: dict[int, str] = field(default_factory=dict)
    acked: Counter[int] = field(default_factory=Counter)

    async def send(self, job: int) -> None:
        """The DM the first time, then Slack's retries of the same event."""
        started, sent = time.perf_counter(), time.time()
        last = self.last.get(job)
        if last is None:
            delivered = await self.slack.user_message(f"U{job}", f"D{job}", f"please do job {job}")
            self.ts[job] = delivered.event["ts"]
        else:
            delivered = await self.slack.deliver_event(last.event, retry_of=last)
        self.attempts.append(Attempt(job, delivered.status, time.perf_counter() - started, sent))
        self.last[job] = delivered
        if delivered.acked:
            self.acked[job] += 1

    async def stream(self, jobs: list[int], rate: float, retry_after: float) -> None:
        """Job i at i / rate s (all at once without a rate), its retry ``retry_after`` s later."""

        async def one(job: int, delay: float) -> None:
            await asyncio.sleep(delay)
            await self.send(job)
            await asyncio.sleep(retry_after)
            await self.send(job)

        await asyncio.gather(*(one(job, n / rate if rate else 0) for n, job in enumerate(jobs)))

    async def complete(self, jobs: list[int], timeout: float = 60) -> None:
        """Sends again what the bot did not ack, until each job was acked ``wanted`` times."""
        deadline = time.monotonic() + timeout
        while owed := [job for job in jobs if self.acked[job] < self.wanted]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"jobs {owed} not acked {self.wanted} times")
            await asyncio.gather(*(self.send(job) for job in owed))
            if any(self.acked[job] < self.wanted for job in owed):
                await asyncio.sleep(0.5)
