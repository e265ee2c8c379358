"""The usage view and the spend limits' read at 10,000 tasks (a year of them).

A tasks folder of 10,000 tasks with 1-3 paid dispatch records each, started over the last
365 days by 20 people in 10 channels (a tenth by routines), is written first (not measured).

  spending:  ``await store.spending(since)``, CPU time: the first call, which builds the index from
             nothing; cold (a fresh store object, the index already built), over the whole
             year and over this month (what every new agent's limit check reads); warm
  command:   ``harness usage --json --by person --since <a year ago>`` and ``--by day`` as
             subprocesses, wall and CPU time (interpreter start included), next to
             ``python -m harness --help`` (the fixed cost of starting)

Usage: .venv/bin/python bench/usage.py [--tasks 10000] [--runs 7]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from common import copy_project

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.project import load_project  # noqa: E402
from harness.tasks.model import DispatchRecord, Task, ThreadRef, Trigger  # noqa: E402
from harness.tasks.store import FileTaskStore, journal_file_name  # noqa: E402
from harness.tasks.task_json import dump_task  # noqa: E402

NOW = datetime.now(UTC)


def build_tasks(folder: Path, count: int, rng: random.Random) -> float:
    """``count`` task folders written directly (no fsync, no index); what they cost in all."""
    billed = 0.0
    for n in range(count):
        slug = f"task-{n:05d}"
        started = NOW - timedelta(days=365 * n / count)
        routine = Trigger("nightly", "schedule", started.isoformat(), "-") if n % 10 == 0 else None
        records = []
        for d in range(rng.randint(1, 3)):
            cost = round(rng.random(), 4)
            billed += cost
            records.append(
                DispatchRecord(
                    agent_id=f"{slug}-{d}",
                    role=rng.choice(("developer", "reviewer", "product-analyst")),
                    started_at=(started + timedelta(minutes=d)).isoformat(),
                    status="completed",
                    journal_file=journal_file_name(f"{slug}-{d}"),
                    cost_usd=cost,
                    requested_by=f"U{rng.randrange(20):04d}" if d == 0 else None,
                )
            )
        task = Task(
            slug=slug,
            created=started.isoformat(),
            description="bench task",
            thread=ThreadRef(f"C{n % 10:04d}", f"1700000000.{n:06d}"),
            requester=f"U{n % 20:04d}",
            repository=("web", "api", None)[n % 3],
            trigger=routine,
            dispatches=tuple(records),
        )
        (folder / slug).mkdir()
        (folder / slug / "task.json").write_bytes(dump_task(task))
    return billed


async def timed(tasks_dir: Path, since: str) -> tuple[float, int]:
    """CPU seconds of this process (the index is read in a worker thread: counted too)."""
    store = FileTaskStore(tasks_dir)
    try:
        started = time.process_time()
        rows = await store.spending(since)
        return time.process_time() - started, len(rows)
    finally:
        await store.close()


def command(config: Path, *args: str) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "harness", *args, "--config", str(config)],
                   check=True, capture_output=True, cwd=REPO)  # fmt: skip
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def line(name: str, samples: list[float]) -> str:
    median = statistics.median(samples) * 1000
    return f"{name:<58} median {median:8.1f} ms  min {min(samples) * 1000:7.1f}  (n={len(samples)})"


def command_line(name: str, samples: list[tuple[float, float]]) -> str:
    wall = statistics.median(w for w, _ in samples) * 1000
    cpu = statistics.median(c for _, c in samples) * 1000
    return f"{name:<58} median wall {wall:7.1f} ms  CPU {cpu:7.1f} ms  (n={len(samples)})"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench-usage-"))
    try:
        config = copy_project(scratch / "project")
        tasks_dir = load_project(config).config.tasks_dir
        tasks_dir.mkdir(parents=True, exist_ok=True)
        billed = build_tasks(tasks_dir, args.tasks, random.Random(37))
        year = (NOW - timedelta(days=366)).strftime("%Y-%m-%d")
        month = NOW.strftime("%Y-%m-01")
        first, rows = await timed(tasks_dir, year)
        print(f"{args.tasks} tasks, {rows} paid agents, ${billed:.2f} billed")
        print(line("store.spending(year), first (builds the index)", [first]))
        cold_year = [(await timed(tasks_dir, year))[0] for _ in range(args.runs)]
        print(line("store.spending(year), fresh store", cold_year))
        cold_month = [(await timed(tasks_dir, month))[0] for _ in range(args.runs)]
        print(line("store.spending(this month), fresh store (a limit check)", cold_month))
        store = FileTaskStore(tasks_dir)
        try:
            warm = []
            for _ in range(args.runs):
                started = time.process_time()
                await store.spending(month)
                warm.append(time.process_time() - started)
        finally:
            await store.close()
        print(line("store.spending(this month), same store (warm)", warm))
        out = subprocess.run(
            [sys.executable, "-m", "harness", "usage", "--json", "--since", year,
             "--config", str(config)], check=True, capture_output=True, cwd=REPO, text=True,
        ).stdout  # fmt: skip
        total = json.loads(out)["totalUsd"]
        assert abs(total - billed) < 1e-6, (total, billed)
        print(f"harness usage --json total ${total:.2f} = billed ${billed:.2f}")
        helps, persons, days = [], [], []
        for _ in range(args.runs):  # taking turns, so a busy moment hits each alike
            helps.append(command(config, "--help"))
            persons.append(command(config, "usage", "--json", "--by", "person", "--since", year))
            days.append(command(config, "usage", "--by", "day", "--since", year))
        print(command_line("python -m harness --help (starting Python and the CLI)", helps))
        print(command_line("python -m harness usage --json --by person --since <year>", persons))
        print(command_line("python -m harness usage --by day --since <year>", days))
        print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
