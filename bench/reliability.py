"""The Slack bot's reliability: a restart in the middle of a burst, and Slack recovering.

The bot runs as people run it, ``harness bot --mode http --host 127.0.0.1`` on a copy of the
shipped config and roles (its log in a file per run, as ``--log-file`` writes it, its standard
error in another), against our Slack emulator on loopback; its agents are the real Claude Code
CLI talking to the scripted model. The model serves from a thread of this process, the
emulator from this process's event loop (which also times the deliveries).

  restart  --threads DMs (user Un in DM channel Dn, "please do job n"), sent at --rate per
           second, and every event delivered a second time --retry-after s after the first
           (a Slack retry: same event_id, X-Slack-Retry-Num). Each agent takes --stall s on its
           one model turn, then finishes quoting its job (the config runs 4 agents at once, the
           others queue). Once --restart-after DMs (default half) were sent, the bot gets
           SIGTERM (graceful) or SIGKILL, and starts again on the same folder and port. A
           delivery that fails while it is down is sent again (as Slack retries) until every
           event was acked twice. Then, within --wait s, every thread must reach its final
           reaction; --settle s later the figures are taken:
             outcomes     per thread: a result (a bot message "... finished" and ✅), the
                          notice "... was interrupted" (with its Run again button, and ❌),
                          "I am shutting down, so I did not start on this" or the like (❌), or none
             runs         agent sessions per thread, from the scripted model's requests
                          (X-Claude-Code-Session-Id; the job number is in the first user
                          text): threads run more than once are duplicate runs
             tracebacks   "Traceback" in the bot's log files and standard error
             ack latency  each delivery, request sent -> HTTP status (p50 / p99 / max), over
                          every delivery that got an answer; the emulator sends them from
                          the loop that also answers the bot's Web API calls
             also         stale "is working…" status messages, results quoting another
                          thread's job, threads with two outcomes, time from the signal to
                          the new bot listening, and claude CLIs a killed bot left behind;
                          each thread without an outcome is listed with what the bot said
                          there and when its deliveries went out, counted from the signal
  recovery the bot's chat.postMessage, chat.update, streams and reactions.add all fail (HTTP 500,
           from before the DM on, so no 👀 and no status message either); one DM; once the
           bot has tried and failed to post the agent's result, Slack stays down --outages s
           more, then recovers at T. Measured:
           T -> the result in the thread (the emulator's record of the call that took it) and
           T -> ✅ on the DM; --recoveries runs per outage. The outbox retries after 1, 2, 4,
           8, 16, then every 30 s (BotOptions.delivery_retry_limit), so the figure depends on
           how long Slack was down.

Usage: .venv/bin/python bench/reliability.py [--threads 50] [--term | --kill]
           [--recoveries 5] [--outages 2 10] [--keep DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import re
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bot_process import SECRET, TOKEN, BotProcess, alive, children, until
from common import percentile
from slack_threads import FINAL, Deliveries, Outcome, outcome

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.testing.slack_emulator import ApiCall, SlackEmulator
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn

JOB = re.compile(r"please do job (\d+)")
# Every call that posts or edits a message, or reacts: replies are streamed by default, and
# the result closes the stream (chat.stopStream) or, without one, is posted.
POSTING = ("chat.postMessage", "chat.update", "chat.startStream", "chat.appendStream")
RESULT_METHODS = (*POSTING, "chat.stopStream", "reactions.add")


# ---------------------------------------------------------------------------- the model


def job_of(request: ModelRequest) -> int | None:
    found = JOB.findall(request.first_user_text)
    return int(found[-1]) if found else None


def session_of(request: ModelRequest) -> str:
    headers = {k.lower(): v for k, v in request.headers.items()}
    return str(headers.get("x-claude-code-session-id", f"request-{request.index}"))


@dataclass
class Jobs:
    """The script: each agent's one turn takes ``stall`` s, then finishes quoting its job."""

    stall: float

    def __call__(self, request: ModelRequest) -> Turn:
        done = Turn.finish(f"Done: job {job_of(request)}")
        return dataclasses.replace(done, stall_seconds=self.stall)


def runs_per_job(model: ScriptedModel) -> Counter[int | None]:
    """Agent sessions per job (a session is one CLI run)."""
    first: dict[str, ModelRequest] = {}
    for request in model.main_requests:
        first.setdefault(session_of(request), request)
    return Counter(job_of(request) for request in first.values())


# ---------------------------------------------------------------------------- restart


@dataclass
class Restart:
    stop_seconds: float = 0.0  # signal -> old process gone
    down_seconds: float = 0.0  # signal -> new process listening
    at_seconds: float = 0.0  # since the first DM
    signalled: float = 0.0  # epoch seconds
    sent_before: int = 0  # DMs sent before the signal
    agents_before: int = 0  # agent sessions started before the signal
    clis: set[int] = field(default_factory=set)  # the old bot's child processes at the signal
    orphans_at_restart: int = 0  # of those, still running when the new bot listened
    orphans_at_end: int = 0


async def restart_bot(
    bot: BotProcess,
    deliveries: Deliveries,
    model: ScriptedModel,
    sig: signal.Signals,
    after_events: int,
    began: float,
) -> Restart:
    """Once ``after_events`` DMs went out: stop, start again."""
    await until(lambda: len(deliveries.last) >= after_events, 60, "the restart's moment")
    restart = Restart(at_seconds=time.perf_counter() - began, signalled=time.time())
    restart.sent_before = len(deliveries.last)
    restart.agents_before = sum(runs_per_job(model).values())
    restart.clis = children(bot.pid)
    started = time.perf_counter()
    restart.stop_seconds = await bot.stop(sig)
    await bot.start()
    restart.down_seconds = time.perf_counter() - started
    restart.orphans_at_restart = len(alive(restart.clis))
    return restart


async def measure_restart(folder: Path, args: argparse.Namespace, sig: signal.Signals) -> list[str]:
    jobs = list(range(1, args.threads + 1))
    with ScriptedModel.in_thread(Jobs(args.stall)) as model:
        async with SlackEmulator(signing_secret=SECRET, bot_token=TOKEN) as slack:
            bot = BotProcess(folder, slack, model)
            await bot.start()
            deliveries = Deliveries(slack)
            began = time.perf_counter()
            _, restart = await asyncio.gather(
                deliveries.stream(jobs, args.rate, args.retry_after),
                restart_bot(bot, deliveries, model, sig, args.restart_after, began),
            )
            await deliveries.complete(jobs)
            outcomes: dict[int, Outcome] = {}

            def all_final() -> bool:
                for job in jobs:
                    if job not in outcomes or outcomes[job].kind == "none":
                        outcomes[job] = outcome(slack, job, deliveries.ts[job])
                return all(o.kind != "none" for o in outcomes.values())

            timed_out = False
            try:
                await slack.wait_for(all_final, args.wait)
            except TimeoutError:
                timed_out = True
            final_seconds = time.perf_counter() - began
            await asyncio.sleep(args.settle)  # anything late: a second run, a second outcome
            outcomes = {job: outcome(slack, job, deliveries.ts[job]) for job in jobs}
            runs = runs_per_job(model)
            restart.orphans_at_end = len(alive(restart.clis))
            await bot.stop()
            tracebacks = bot.tracebacks()
    return report_restart(
        sig, args, jobs, outcomes, runs, deliveries, restart, tracebacks, final_seconds, timed_out
    )


def report_restart(
    sig: signal.Signals,
    args: argparse.Namespace,
    jobs: list[int],
    outcomes: dict[int, Outcome],
    runs: Counter[int | None],
    deliveries: Deliveries,
    restart: Restart,
    tracebacks: list[str],
    final_seconds: float,
    timed_out: bool,
) -> list[str]:
    kinds = Counter(o.kind for o in outcomes.values())
    interrupted = [j for j in jobs if outcomes[j].kind == "interrupted"]
    without_button = [j for j in interrupted if not outcomes[j].button]
    twice = sorted(j for j in jobs if runs[j] > 1)
    never = [j for j in jobs if runs[j] == 0]
    results_without_run = [j for j in jobs if outcomes[j].kind == "result" and runs[j] == 0]
    answered = [a for a in deliveries.attempts if a.status is not None]
    ms = [a.seconds * 1000 for a in answered]
    old = [a.seconds * 1000 for a in answered if a.sent < restart.signalled]
    new = [a.seconds * 1000 for a in answered if a.sent >= restart.signalled]
    statuses = Counter(a.status for a in deliveries.attempts)
    with_outcome = len(jobs) - kinds["none"]
    lines = [
        f"restart by {sig.name} in the middle of {len(jobs)} DMs ({args.rate:g}/s, each "
        f"delivered twice, agents {args.stall:g} s each):",
        f"  restart at {restart.at_seconds:.1f} s after the first DM: {restart.sent_before} "
        f"DMs sent, {restart.agents_before} agents started; old bot gone "
        f"{restart.stop_seconds:.2f} s after the signal, new bot listening after "
        f"{restart.down_seconds:.2f} s",
        f"  outcomes: {with_outcome}/{len(jobs)} threads, "
        + (
            f"{kinds['none']} still without one after waiting {args.wait:g} s"
            if timed_out
            else f"all final {final_seconds:.1f} s after the first DM"
        )
        + f": ✅ result {kinds['result']}, "
        f"interrupted notice {kinds['interrupted']} ({len(interrupted) - len(without_button)} "
        f"with Run again; {sum(runs[j] > 0 for j in interrupted)} had reached the model, the "
        f"others were queued), 'shutting down, not started' notice {kinds['not started']}, "
        f"other ❌ {kinds['other']}, none {kinds['none']}",
        f"  agent runs: {sum(runs[j] for j in jobs)} in {len(jobs)} threads; threads run more "
        f"than once: {len(twice)}{' ' + str(twice) if twice else ''}; never run: {len(never)}; "
        f"runs not matched to a job: {runs[None]}",
        f"  threads with two outcomes: {sum(o.messages > 1 for o in outcomes.values())}, stale "
        f"status messages: {sum(len(o.stale) for o in outcomes.values())}, results quoting another "
        f"job: {sum(o.wrong_job for o in outcomes.values())}, results with no run: "
        f"{len(results_without_run)}",
        f"  deliveries: {len(deliveries.attempts)} attempts, answered {dict(statuses)} "
        f"(None: the bot was down, sent again)",
        f"  ack latency over {len(ms)} answered deliveries: p50 {percentile(ms, 50):.1f} ms  "
        f"p99 {percentile(ms, 99):.1f} ms  max {max(ms):.1f} ms (old bot: {len(old)}, p99 "
        f"{percentile(old, 99):.1f} ms; new bot: {len(new)}, p99 {percentile(new, 99):.1f} ms)",
        "  slowest acks: "
        + ", ".join(
            f"{a.seconds * 1000:.0f} ms sent at {a.sent - restart.signalled:+.2f} s"
            for a in sorted(answered, key=lambda a: -a.seconds)[:5]
        )
        + " (from the signal)",
        f"  child processes (claude CLIs) of the old bot: {len(restart.clis)}, still running "
        f"when the new bot listened: {restart.orphans_at_restart}, at the end: "
        f"{restart.orphans_at_end}",
        f"  tracebacks in the bot's logs: {len(tracebacks)}",
    ]
    lines += [f"    {t}" for t in tracebacks[:10]]
    for job in jobs:  # what went wrong, thread by thread
        o = outcomes[job]
        if (
            o.kind in ("none", "other", "not started")
            or (o.kind == "interrupted" and not o.button)
            or o.stale
        ):
            tries = ", ".join(
                f"{a.status or 'failed'} at {a.sent - restart.signalled:+.2f} s"
                for a in deliveries.attempts
                if a.job == job
            )
            lines.append(
                f"    job {job}: {o.kind}, reactions {sorted(o.reactions)}, runs {runs[job]}, "
                f"bot said {o.text[:300]!r}; deliveries (from the signal): {tries}"
            )
            lines += [f"      left in the thread: {text!r}" for text in o.stale]
    return lines


# ---------------------------------------------------------------------------- recovery


def result_call(slack: SlackEmulator, channel: str, ok: bool) -> list[ApiCall]:
    """Calls that carried the result into ``channel`` (or tried to)."""
    return [
        c
        for c in slack.calls()
        if c.method in ("chat.postMessage", "chat.update", "chat.stopStream")
        and c.params.get("channel") == channel
        and "✅ *developer* finished" in str(c.params)
        and c.ok == ok
    ]


async def recover_once(
    slack: SlackEmulator, model: ScriptedModel, job: int, outage: float
) -> tuple[float, float, int]:
    """(T -> result in the thread, T -> ✅, failed tries) for one DM whose result Slack
    refused until ``outage`` s after the first try."""
    channel = f"D{job}"
    for method in RESULT_METHODS:
        slack.faults.fail_next(method, times=100_000, status=500)
    asked = await slack.user_message(f"U{job}", channel, f"please do job {job}")
    ts = asked.event["ts"]
    await model.wait_for_request(lambda r: job_of(r) == job, 60)
    first = await slack.wait_for(lambda: result_call(slack, channel, ok=False), 60)
    await asyncio.sleep(max(0.0, first[0].time + outage - time.time()))
    slack.faults.clear()
    recovered = time.time()
    [posted] = await slack.wait_for(lambda: result_call(slack, channel, ok=True), 120)

    def reacted() -> list[ApiCall]:
        return [
            c
            for c in slack.calls("reactions.add")
            if c.ok and c.params.get("timestamp") == ts and c.params.get("name") in FINAL
        ]

    [reaction] = await slack.wait_for(reacted, 120)
    assert reaction.params["name"] == "white_check_mark", reaction.params
    tries = len(result_call(slack, channel, ok=False))
    return posted.time - recovered, reaction.time - recovered, tries


async def measure_recovery(folder: Path, args: argparse.Namespace) -> list[str]:
    lines = []
    with ScriptedModel.in_thread(Jobs(0)) as model:
        async with SlackEmulator(signing_secret=SECRET, bot_token=TOKEN) as slack:
            bot = BotProcess(folder, slack, model)
            await bot.start()
            job = 0
            for outage in args.outages:
                posted, reacted, tries = [], [], []
                for _ in range(args.recoveries):
                    job += 1
                    p, r, t = await recover_once(slack, model, job, outage)
                    posted.append(p)
                    reacted.append(r)
                    tries.append(t)
                lines.append(
                    f"Slack down {outage:g} s after the result was owed, then back at T "
                    f"(n={len(posted)}): T -> result in the thread median "
                    f"{statistics.median(posted):.2f} s max {max(posted):.2f} s; T -> ✅ "
                    f"median {statistics.median(reacted):.2f} s max {max(reacted):.2f} s; "
                    f"failed tries of the result {min(tries)}-{max(tries)}"
                )
            doubles = [
                j for j in range(1, job + 1) if len(result_call(slack, f"D{j}", ok=True)) != 1
            ]
            await bot.stop()
            tracebacks = bot.tracebacks()
    lines.append(
        f"results posted other than once: {len(doubles)}; tracebacks in the bot's logs: "
        f"{len(tracebacks)}"
    )
    lines += [f"    {t}" for t in tracebacks[:10]]
    return lines


# ---------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=50, help="DMs in the restart burst")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--term", action="store_true", help="only the SIGTERM restart")
    which.add_argument("--kill", action="store_true", help="only the SIGKILL restart")
    parser.add_argument("--rate", type=float, default=10.0, help="DMs per second (0: at once)")
    parser.add_argument("--retry-after", type=float, default=1.0, help="s before each retry")
    parser.add_argument("--restart-after", type=int, help="DMs sent before the restart")
    parser.add_argument("--stall", type=float, default=1.5, help="s each agent's turn takes")
    parser.add_argument("--wait", type=float, default=180.0, help="s to wait for outcomes")
    parser.add_argument("--settle", type=float, default=5.0, help="s to watch after that")
    parser.add_argument("--recoveries", type=int, default=5, help="runs per outage (0: skip)")
    parser.add_argument("--outages", type=float, nargs="+", default=[2.0, 10.0])
    parser.add_argument("--keep", type=Path, help="keep the bots' folders (logs, tasks) here")
    args = parser.parse_args()
    # The emulator warns of every delivery that finds the bot down: counted, not printed.
    logging.getLogger("bot.testing").setLevel(logging.ERROR)
    args.restart_after = args.restart_after or args.threads // 2
    signals = [signal.SIGTERM] if args.term else [signal.SIGKILL] if args.kill else []
    signals = signals or [signal.SIGTERM, signal.SIGKILL]
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or scratch
        for sig in signals:
            lines = asyncio.run(measure_restart(Path(tmp, sig.name), args, sig))
            print("\n".join(lines), flush=True)
        if args.recoveries:
            lines = asyncio.run(measure_recovery(Path(tmp, "recovery"), args))
            print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
