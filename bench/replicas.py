"""Bot replicas: a burst of DMs spread over three ``harness bot`` replicas against one.

A nats-server (JetStream, its store in a temporary folder), ``--workers`` ``harness worker``
processes (4 agent slots in all) and N replicas of ``harness bot --mode http`` on one config
(``runtime`` and ``store`` on that server; the shipped roles and spares), the Slack emulator
in this process, the scripted model (each agent answers at once). The signed events are sent
by a client process of their own, each to a replica chosen round-robin, as a load balancer
spreads them:

  burst      ``--dms`` DMs in ``--seconds``, each a new task, DM n to replica n mod N; a
             tenth of them sent again one replica further on, as Slack retries an event it
             saw no ack for (same body, same event id);
  follow-up  once the bot has taken in the first tenth of the DMs (👀), a reply in each of
             those threads, to the replica two further on (their agents run or queue then).

Reported for N = 1 and N = 3, in turns (``--runs`` pairs), the same run: each event's ack
latency (request written -> HTTP 200: p50, p95, max; events sent while agents run); the time
from the first event to the last thread's final reaction; the threads answered exactly as
often as they asked (one result, two with a follow-up; any other count is printed with its
thread); what each replica decided (from its log); the tasks and runs in the store
(``harness tasks --json``: one task a thread, one run a request, the retries none); the most
``claude`` processes at once; the CPU of the whole set-up (replicas, workers and their agents,
nats-server); the load average at its start.

Usage: .venv/bin/python bench/replicas.py [--dms 200] [--seconds 2] [--runs 1] [--workers 1]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from asyncio.subprocess import PIPE
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from common import copy_project, free_port, percentile
from slack import EVENT_CLIENT, FINAL, on, seen
from spares_burst import processes, results

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bot.testing.slack_emulator import DeliveredEvent, SlackEmulator  # noqa: E402
from harness.testing.nats_server import NatsServer  # noqa: E402
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn  # noqa: E402
from harness.testing.workers import start_workers, stop_workers, worker_env  # noqa: E402

SLOTS = 4  # agent slots over all workers
LIMIT = 900.0  # seconds for every request to end
SETTLE = 3.0  # seconds after the last final reaction: a second answer, were one sent, is there


def script(request: ModelRequest) -> Turn:
    return Turn.finish("done", ["a change"])


class Tree:
    """The most ``claude`` processes at once below any of ``roots``, and the CPU time of each
    root and every process below it (each one's last reading; what a process spent after the
    last sample is missed), by the group each root is named with; sampled from /proc every
    100 ms in one scan for all roots."""

    def __init__(self, roots: dict[int, str]) -> None:
        self.roots, self.most = roots, 0
        self.ticks: dict[tuple[int, int], tuple[str, int]] = {}  # (pid, start) -> group, ticks
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> Tree:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._scan()  # the last reading, the processes still there

    def _sample(self) -> None:
        while not self._stop.wait(0.1):
            self._scan()

    def _scan(self) -> None:
        parents, names, spent = processes()

        def group(pid: int) -> str | None:
            up: int | None = pid
            while up and up not in self.roots and up != 1:
                up = parents.get(up)
            return self.roots.get(up) if up else None

        count = 0
        for pid, (start, ticks) in spent.items():
            if (name := group(pid)) is not None:
                count += names[pid] == "claude"
                # The agents' CLIs apart from the worker (or bot) they run below.
                self.ticks[(pid, start)] = ("claude" if names[pid] == "claude" else name, ticks)
        self.most = max(self.most, count)

    def cpu_seconds(self) -> dict[str, float]:
        spent: dict[str, float] = collections.defaultdict(float)
        for name, ticks in self.ticks.values():
            spent[name] += ticks / os.sysconf("SC_CLK_TCK")
        return dict(spent)


def children_named(name: str) -> list[int]:
    """This process's live children called ``name``."""
    parents, names, _ = processes()
    return [pid for pid, parent in parents.items() if parent == os.getpid() and names[pid] == name]


def drain(stream: IO[bytes], into: Path) -> None:
    """Copies what a process still writes on ``stream`` into a file, from a thread: a pipe
    nobody reads would fill and stall it."""

    def copy() -> None:
        with into.open("ab") as file:
            shutil.copyfileobj(stream, file)

    threading.Thread(target=copy, daemon=True).start()


def start_replica(
    config: Path, slack: SlackEmulator, model: ScriptedModel, folder: Path, n: int
) -> tuple[subprocess.Popen[bytes], str]:
    """A ``harness bot`` replica, once it listens; its process and events URL."""
    port, log = free_port(), folder / f"bot{n}.log"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SLACK_")},
        **model.env(),
        "SLACK_BOT_TOKEN": slack.identity.bot_token,
        "SLACK_SIGNING_SECRET": slack.identity.signing_secret,
        "SLACK_API_URL": slack.api_url,
    }
    command = [sys.executable, "-m", "harness", "bot", "--mode", "http", "--port", str(port),
               "--config", str(config), "--log-file", str(log)]  # fmt: skip
    bot = subprocess.Popen(command, env=env, cwd=REPO, stderr=subprocess.PIPE)
    assert bot.stderr is not None
    while b"listening on" not in (banner := bot.stderr.readline()):
        if not banner:
            bot.wait()
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            raise RuntimeError(f"replica {n} exited before it listened:\n{tail}")
    drain(bot.stderr, folder / f"bot{n}.stderr")
    return bot, f"http://127.0.0.1:{port}/slack/events"


def stop_replicas(bots: list[subprocess.Popen[bytes]]) -> None:
    """Each replica told to stop, then waited for; killed if it takes longer than 60 s."""
    for bot in bots:
        bot.terminate()
    for bot in bots:
        try:
            bot.wait(60)
        except subprocess.TimeoutExpired:
            print(f"replica {bot.pid} did not stop within 60 s: killed", file=sys.stderr)
            bot.kill()
            bot.wait()


async def send(
    slack: SlackEmulator, urls: list[str], bodies: list[str], rate: float
) -> list[float]:
    """Each body signed and POSTed to its URL by the client process; each one's ack latency."""
    job = {"urls": urls, "secret": slack.identity.signing_secret, "bodies": bodies, "rate": rate}
    client = await asyncio.create_subprocess_exec(
        sys.executable, "-c", EVENT_CLIENT, cwd=REPO, stdin=PIPE, stdout=PIPE
    )
    out, _ = await client.communicate(json.dumps(job).encode())
    assert client.returncode == 0, "the event client failed (its error is above)"
    latencies: list[float] = json.loads(out)
    return latencies


@dataclass(frozen=True)
class Burst:
    acks: list[float]  # seconds, every event sent (DMs, retries, follow-ups)
    seconds: float | None  # first event sent -> last thread's final reaction; None: not all
    wrong: list[tuple[str, int, int]]  # thread, results seen, results expected
    threads: dict[str, int]  # thread ("channel/ts") -> requests made in it


async def burst(slack: SlackEmulator, urls: list[str], tag: str, dms: int, seconds: float) -> Burst:
    slack.delivery = "none"  # stored only: the client delivers them
    stored: list[DeliveredEvent] = []
    for n in range(dms):
        stored.append(await on(slack, slack.user_message(f"U{tag}{n}", f"D{tag}{n}", f"do {n}")))
    bodies = [json.dumps({**d.payload, "event_id": f"Ev{tag}{n}"}) for n, d in enumerate(stored)]
    to = [urls[n % len(urls)] for n in range(dms)]
    # Slack's retries of events it saw no ack for (a tenth, spread over the burst): the same
    # body, one replica further on, after the burst's last DM.
    retried = [n for n in range(dms) if n % 10 == 5]
    bodies += [bodies[n] for n in retried]
    to += [urls[(n + 1) % len(urls)] for n in retried]
    started = time.perf_counter()
    acks = await send(slack, to, bodies, len(bodies) / seconds)

    # A reply in a tenth of the threads (spread over the burst: most of them queued or at
    # work then) once the bot took their DM in, to the replica two further on (with three,
    # neither the one that took the DM nor the one its retry would go to).
    followed = [n for n in range(dms) if n % 10 == 0]
    for n in followed:
        await on(slack, slack.wait_for(seen(slack, f"D{tag}{n}", stored[n].event["ts"]), 120))
    replies = []
    for n in followed:
        ts = stored[n].event["ts"]
        said = slack.user_message(f"U{tag}{n}", f"D{tag}{n}", "and more", thread_ts=ts)
        replies.append(await on(slack, said))
    follow_ups = [
        json.dumps({**r.payload, "event_id": f"Ev{tag}F{n}"}) for n, r in enumerate(replies)
    ]
    acks += await send(slack, [urls[(n + 2) % len(urls)] for n in followed], follow_ups, 100)

    ended = [(f"D{tag}{n}", d.event["ts"]) for n, d in enumerate(stored)]
    ended += [(f"D{tag}{n}", r.event["ts"]) for n, r in zip(followed, replies, strict=True)]
    everything = lambda: all(slack.reactions(c, ts) & FINAL for c, ts in ended)  # noqa: E731
    elapsed: float | None = None
    try:  # not called by ``on``, whose bound is shorter
        await asyncio.to_thread(slack.call, slack.wait_for(everything, LIMIT), LIMIT + 30)
        elapsed = time.perf_counter() - started
    except TimeoutError:  # the threads left unanswered are named below
        print(f"not every request ended within {LIMIT:g} s", file=sys.stderr)
    await asyncio.sleep(SETTLE)
    threads = {
        f"D{tag}{n}/{d.event['ts']}": 2 if n in followed else 1 for n, d in enumerate(stored)
    }
    wrong = []
    for thread, asked in threads.items():
        channel, ts = thread.split("/")
        if (got := results(slack, channel, ts)) != asked:
            wrong.append((thread, got, asked))
    return Burst(acks, elapsed, wrong, threads)


def decisions(folder: Path, replicas: int, tag: str) -> list[collections.Counter[str]]:
    """What each replica decided about the bench's events (its one log line per request)."""
    pattern = re.compile(rf" from U{tag}\d+ in \w+: (.*) \(\d+\.\d ms\)$", re.M)
    counts = []
    for n in range(replicas):
        log = (folder / f"bot{n}.log").read_text("utf-8")
        count = collections.Counter(pattern.findall(log))
        if forwarded := len(re.findall(rf"replica_forward: .*'D{tag}\d.* went to replica", log)):
            count["handed to the replica holding the thread"] = forwarded
        counts.append(count)
    return counts


async def stored_runs(config: Path, env: dict[str, str], threads: dict[str, int]) -> list[str]:
    """What the store disagrees with: a thread without exactly one task, or whose task ran
    other than once per request made in it (``harness tasks --json``, another process)."""
    listed = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "harness", "tasks", "--json", "--config", str(config),
        env=env, cwd=REPO, stdout=PIPE, stderr=PIPE,
    )  # fmt: skip
    out, err = await listed.communicate()
    if listed.returncode != 0:
        return [f"harness tasks --json failed: {err.decode(errors='replace')[-500:]}"]
    runs: dict[str, list[int]] = collections.defaultdict(list)
    for task in json.loads(out)["tasks"]:
        thread = task.get("thread") or {}
        runs[f"{thread.get('channel')}/{thread.get('threadTs')}"].append(task["dispatchCount"])
    problems = [f"{t}: runs {runs.get(t, [])}, asked {asked}" for t, asked in threads.items()
                if runs.get(t) != [asked]]  # fmt: skip
    problems += [f"{t}: runs {r}, not a bench thread" for t, r in runs.items() if t not in threads]
    return problems


async def run(
    slack: SlackEmulator, model: ScriptedModel, tmp: Path, replicas: int, args: argparse.Namespace
) -> str:
    tag = f"R{replicas}X{len(list(tmp.iterdir()))}"
    folder = tmp / tag
    folder.mkdir()
    load = os.getloadavg()[0]
    async with NatsServer(folder / "nats") as nats:
        config = copy_project(folder)
        with config.open("a", encoding="utf-8") as file:
            file.write(f"\nruntime: {{kind: nats, url: '{nats.url}'}}\n"
                       f"store: {{kind: nats, prefix: {tag.lower()}}}\n")  # fmt: skip
        names = [f"w{n + 1}" for n in range(args.workers)]
        env = worker_env(model.env())
        workers = await start_workers(names, nats.url, env, folder, slots=SLOTS // args.workers)
        bots: list[subprocess.Popen[bytes]] = []
        logging = [asyncio.ensure_future(_copy(w.stderr, folder / f"{name}.log"))
                   for name, w in workers.items() if w.stderr is not None]  # fmt: skip
        try:
            urls = []
            for n in range(replicas):
                bot, url = await asyncio.to_thread(start_replica, config, slack, model, folder, n)
                bots.append(bot)
                urls.append(url)
            roots = {pid: "nats-server" for pid in children_named("nats-server")}
            roots |= {w.pid: "workers" for w in workers.values()}
            roots |= {b.pid: "replicas" for b in bots}
            with Tree(roots) as tree:
                got = await burst(slack, urls, tag, args.dms, args.seconds)
            store = await stored_runs(config, env, got.threads)
        except BaseException:
            for n in range(replicas):
                if (log := folder / f"bot{n}.log").exists():
                    tail = log.read_text("utf-8", errors="replace").splitlines()[-30:]
                    print(f"replica {n}'s log, last lines:", *tail, sep="\n", file=sys.stderr)
            raise
        finally:
            try:
                await asyncio.to_thread(stop_replicas, bots)
            finally:
                await stop_workers(workers.values())
                await asyncio.gather(*logging)
        spread = decisions(folder, replicas, tag)
    cpu = tree.cpu_seconds()
    ms = [1000 * a for a in got.acks]
    answered = len(got.threads) - len(got.wrong)
    ended = "NOT ALL" if got.seconds is None else f"{got.seconds:.1f} s"
    lines = [
        f"{replicas} replica(s), {args.workers} worker(s), {args.dms} DMs in {args.seconds:g} s "
        f"(+{args.dms // 10} retries, +{args.dms // 10} follow-ups); load average at start "
        f"{load:.1f}",
        f"  acks ({len(ms)}): p50 {statistics.median(ms):.1f} ms, p95 {percentile(ms, 95):.1f}, "
        f"max {max(ms):.1f}",
        f"  all answered in {ended}; answered as asked {answered}/{len(got.threads)}; "
        f"store: {'WRONG' if store else 'one task a thread, one run a request'}",
        f"  peak claude {tree.most}; CPU {sum(cpu.values()):.0f} s ("
        + ", ".join(f"{k} {v:.0f}" for k, v in sorted(cpu.items(), key=lambda kv: -kv[1]))
        + ")",
        "  decided: "
        + "; ".join(
            f"replica {n}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
            for n, c in enumerate(spread)
        ),
    ]
    for thread, seen_, asked in got.wrong:
        n = int(thread.split("/")[0].removeprefix(f"D{tag}"))
        lines.append(
            f"  NOT ANSWERED AS ASKED: {thread}: {seen_} result(s) for {asked} request(s); "
            f"its DM went to replica {n % replicas}"
        )
    lines += [f"  STORE: {problem}" for problem in store[:20]]
    return "\n".join(lines)


async def _copy(stream: asyncio.StreamReader, into: Path) -> None:
    with into.open("ab") as file:
        while chunk := await stream.read(65536):
            file.write(chunk)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dms", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--runs", type=int, default=1, help="pairs of 1 and 3 replicas")
    parser.add_argument("--workers", type=int, default=1, choices=(1, 2))
    parser.add_argument("--keep", type=Path, help="keep the logs and stores in this folder")
    args = parser.parse_args()
    slack = SlackEmulator()
    with (
        tempfile.TemporaryDirectory() as scratch,
        ScriptedModel.in_thread(script) as model,
        slack.in_thread(),
    ):
        tmp = args.keep or Path(scratch)
        tmp.mkdir(parents=True, exist_ok=True)
        failed = False
        for n in range(args.runs):
            for replicas in (1, 3) if n % 2 == 0 else (3, 1):
                report = asyncio.run(run(slack, model, tmp, replicas, args))
                print(report, flush=True)
                failed = failed or "NOT " in report or "STORE: " in report
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
