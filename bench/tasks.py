"""The task store at 10,000 tasks: listings, lookups, the `harness tasks` command, journals.

A tasks folder of 10,000 tasks with 1-3 dispatch records each is built first (not measured).

  summaries:  ``await store.summaries()`` in-process: the first call, which builds the index
              from nothing; cold (a fresh store object, the index already built); warm (the
              same store again)
  record:     ``await store.record(agent_id)`` for a random agent, warm; and
              ``find_by_thread`` of a thread no task has (what every new Slack thread costs)
  tool:       the ``list_tasks`` harness tool (through the tool gateway, as an agent calls it):
              an analyst sees its own task only; one of a category in
              ``mcp.allTasksCategories`` sees all 10,001
  command:    ``harness tasks --config <tmp config>`` (the console script, and ``python -m
              harness tasks``) as subprocesses, wall and CPU time, interpreter start included,
              byte code cached; next to ``python -c pass``, ``harness --help`` and
              ``--version`` (the fixed cost of starting, whatever the number of tasks);
              the commands take turns (A B A B), and with ``--before`` run from an older
              tree too
  journal:    10,000 lines through ``append_jsonl`` + ``flush`` into 100 journals

Usage: .venv/bin/python bench/tasks.py [--tasks 10000] [--runs 7] [--commands-only]
       [--before DIR]   (DIR: an older tree of the project; its commands alternate with these)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import copy_project, summary

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.project import build_orchestrator, load_project  # noqa: E402
from harness.tasks.model import AgentResult, DispatchRecord, Task, ThreadRef  # noqa: E402
from harness.tasks.store import FileTaskStore, journal_file_name  # noqa: E402
from harness.tasks.task_json import dump_task  # noqa: E402
from harness.testing.held_runtime import HeldRuntime  # noqa: E402
from harness.tools.gateway import HarnessTools  # noqa: E402

STATUSES = ("completed", "completed", "failed", "killed", "running")
WORDS = [
    "add",
    "fix",
    "review",
    "plan",
    "settings",
    "page",
    "login",
    "cache",
    "index",
    "slack",
    "thread",
    "agent",
    "bug",
]


def build_tasks(folder: Path, count: int, rng: random.Random) -> list[str]:
    """``count`` task folders written directly (no fsync, no index); the agent ids."""
    agents: list[str] = []
    for n in range(count):
        slug = f"task-{n:05d}"
        records = []
        for d in range(rng.randint(1, 3)):
            agent_id = f"{slug}-dev-{d}"
            agents.append(agent_id)
            status = rng.choice(STATUSES)
            records.append(
                DispatchRecord(
                    agent_id=agent_id,
                    role=rng.choice(("developer", "reviewer", "product-analyst")),
                    cwd="/work/repo",
                    model="sonnet",
                    prompt=" ".join(rng.choices(WORDS, k=12)),
                    started_at=f"2026-01-01T10:00:{d:02d}Z",
                    completed_at=None if status == "running" else f"2026-01-01T10:05:{d:02d}Z",
                    status=status,  # type: ignore[arg-type]
                    journal_file=journal_file_name(agent_id),
                    cost_usd=round(rng.random(), 4),
                    turns=rng.randint(1, 20),
                    result=AgentResult("did " + " ".join(rng.choices(WORDS, k=8)), ("x.py",)),
                )
            )
        task = Task(
            slug=slug,
            created=_created(n),
            description=" ".join(rng.choices(WORDS, k=8)),
            thread=ThreadRef("C0123", f"1700000000.{n:06d}") if n % 2 else None,
            dispatches=tuple(records),
        )
        (folder / slug).mkdir()
        (folder / slug / "task.json").write_bytes(dump_task(task))
    return agents


def _created(n: int) -> str:
    """Distinct, increasing times (one second apart) so "newest first" is a real sort."""
    seconds = 1_750_000_000 + n
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(seconds))


def summary_ms(name: str, samples: list[float]) -> str:
    return (
        f"{name:<30} median {statistics.median(samples) * 1000:.2f} ms  "
        f"min {min(samples) * 1000:.2f}  max {max(samples) * 1000:.2f}  (n={len(samples)})"
    )


def remove_index(folder: Path) -> None:
    for file in folder.glob(".index.sqlite3*"):
        file.unlink()


async def timed_summaries(store: FileTaskStore, expected: int) -> float:
    started = time.perf_counter()
    lines = await store.summaries()
    elapsed = time.perf_counter() - started
    assert len(lines) == expected, len(lines)
    return elapsed


async def bench_summaries(folder: Path, count: int) -> None:
    build = []
    for _ in range(3):
        remove_index(folder)
        store = FileTaskStore(folder)
        build.append(await timed_summaries(store, count))
        await store.close()
    cold = []
    for _ in range(5):
        store = FileTaskStore(folder)
        cold.append(await timed_summaries(store, count))
        await store.close()
    store = FileTaskStore(folder)
    await store.summaries()
    warm = [await timed_summaries(store, count) for _ in range(10)]
    await store.close()
    print(summary("summaries, index from nothing", build))
    print(summary("summaries, cold (fresh store)", cold))
    print(summary("summaries, warm", warm))


async def bench_record(folder: Path, agents: list[str], rng: random.Random) -> None:
    store = FileTaskStore(folder)
    await store.summaries()  # the index exists and is fresh
    samples = []
    for agent_id in rng.sample(agents, 200):
        started = time.perf_counter()
        record = await store.record(agent_id)
        samples.append(time.perf_counter() - started)
        assert record.agent_id == agent_id
    misses = []
    for n in range(10):  # what the bot asks for every new Slack thread
        started = time.perf_counter()
        assert await store.find_by_thread(ThreadRef("C0123", f"1800000000.{n:06d}")) is None
        misses.append(time.perf_counter() - started)
    await store.close()
    print(summary_ms("record(random agent), warm", samples))
    print(summary_ms("find_by_thread, a new thread", misses))


def project_config(root: Path, folder: Path, *, all_tasks: bool = False) -> Path:
    """The shipped project over ``folder``; with ``all_tasks`` its conversational agents see
    every task (``mcp.allTasksCategories``), as a coordinator's would."""
    config = copy_project(root)
    text = config.read_text(encoding="utf-8")
    text = re.sub(r"(?m)^tasks: .*$", f"tasks: {folder}", text)
    if all_tasks:
        text = re.sub(
            r"(?m)^(\s*)allTasksCategories: \[\]", r"\1allTasksCategories: [conversational]", text
        )
    config.write_text(text, encoding="utf-8")
    return config


async def bench_tool(root: Path, folder: Path, count: int) -> None:
    """``list_tasks`` as a live analyst calls it: over its own task (what an agent sees by
    default), and over every task (an agent of an all-tasks category)."""
    for all_tasks, name, expected in (
        (False, "list_tasks tool, own task", 1),
        (True, "list_tasks tool, all tasks", count + 1),
    ):
        project = root / ("all" if all_tasks else "own")
        project.mkdir()
        config = project_config(project, folder, all_tasks=all_tasks)
        runtime = HeldRuntime()
        orchestrator = build_orchestrator(load_project(config), runtime)
        try:
            tools = HarnessTools(orchestrator.services)
            # Called in a live analyst's name, as its MCP server calls it (audited in its task).
            analyst = await orchestrator.draft("product-analyst", f"plan: list the tasks {name}")
            await runtime.wait_started(1)
            samples = []
            for _ in range(3):
                started = time.perf_counter()
                reply = await tools.call(analyst.agent_id, "list_tasks", {})
                samples.append(time.perf_counter() - started)
                listed = reply.payload["tasks"]
                assert len(listed) == expected, (name, len(listed))
            if not all_tasks:
                assert listed[0]["slug"] == analyst.task_slug, listed
        finally:
            # The held agent ends (interrupted) and its record lands while its task is there.
            await orchestrator.shutdown()
        print(summary(name, samples))
        # The analyst's task goes: the command below lists the 10,000 built tasks only.
        shutil.rmtree(folder / analyst.task_slug)


def _timed_once(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """Wall and CPU seconds (user + system) of one run of ``command`` in ``cwd`` (not the
    repository: ``python -m`` puts its folder first on sys.path, before PYTHONPATH); its
    output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr[-500:]}")
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, done.stdout


def bench_command(config: Path, count: int, runs: int, before: Path | None = None) -> None:
    """The commands as a user runs them, with byte code cached: these machines export
    PYTHONDONTWRITEBYTECODE, a user's installed wheel has byte code, so it is unset for the
    measured processes (and a first, unmeasured run writes it). The commands take turns,
    one run each per round (A B A B), so that a shared machine's load falls on all alike;
    with ``before`` (an older tree of the project, put first on PYTHONPATH) each command
    runs from it too, alternating with this tree."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("HARNESS_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    # What `harness tasks` remembers of config.yaml (the first, unmeasured run writes it, as
    # a user's first listing does) stays in the bench's folder.
    env["XDG_CACHE_HOME"] = str(config.parent / "cache")
    unremembered = {**env, "XDG_CACHE_HOME": str(config)}  # a file: nothing is written there
    script = str(Path(sys.executable).parent / "harness")  # the console script
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "harness --help": [script, "--help"],
        "harness --version": [script, "--version"],
        "harness tasks": [script, "tasks", "--config", str(config)],
        "python -m harness tasks": [
            sys.executable,
            "-m",
            "harness",
            "tasks",
            "--config",
            str(config),
        ],
    }
    trees = {"": env}
    if before is not None:
        # Each tree remembers config.yaml in a folder of its own: the entry names the
        # modules that read it, so alternating trees in one folder would forget it each time.
        older = {"PYTHONPATH": str(before), "XDG_CACHE_HOME": str(config.parent / "cache-before")}
        trees = {"before: ": {**env, **older}, "after: ": env}
    timed = [("python -c pass", commands.pop("python -c pass"), env)]
    # config.yaml loaded in full each time, as a first listing (or any config edit) does.
    timed.append(("harness tasks, config not remembered", commands["harness tasks"], unremembered))
    timed += [
        (f"{label}{name}", command, tree)
        for name, command in commands.items()
        for label, tree in trees.items()
    ]
    for _, command, tree in timed:
        _timed_once(command, tree, config.parent)
    print(f"load average before the commands: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    walls: dict[str, list[float]] = {name: [] for name, _, _ in timed}
    cpus: dict[str, list[float]] = {name: [] for name, _, _ in timed}
    outs: dict[str, str] = {}
    for _ in range(runs):
        for name, command, tree in timed:
            wall, cpu, outs[name] = _timed_once(command, tree, config.parent)
            walls[name].append(wall)
            cpus[name].append(cpu)
    for name, command, _ in timed:
        line = summary(name, walls[name]) + f"  cpu median {statistics.median(cpus[name]):.3f} s"
        if "tasks" in command:
            listed = sum(1 for row in outs[name].splitlines() if row.startswith("task-"))
            assert listed == count, f"{name}: {listed} of {count} tasks listed"
            line += f"  ({listed} tasks listed)"
        print(line)
    print(f"load average after the commands: {os.getloadavg()[0]:.2f}")


async def bench_journal(folder: Path) -> None:
    store = FileTaskStore(folder)
    slug = "task-00001"
    samples = []
    for _ in range(3):
        started = time.perf_counter()
        for n in range(10_000):
            store.append_jsonl(
                slug,
                journal_file_name(f"bench-{n % 100}"),
                {"type": "assistant", "n": n, "text": "some streamed text " * 5},
            )
        await store.flush()
        samples.append(time.perf_counter() - started)
    lines = await store.read_jsonl(slug, journal_file_name("bench-7"))
    assert len(lines) == 300, len(lines)
    await store.close()
    print(summary("10,000 journal lines + flush", samples))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=7, help="runs of each command")
    parser.add_argument(
        "--before",
        type=Path,
        metavar="DIR",
        help="an older tree of the project (e.g. `git archive` of a commit, unpacked): the "
        "commands run from it too, alternating with this tree's",
    )
    parser.add_argument(
        "--commands-only", action="store_true", help="only the command rows (start-up)"
    )
    args = parser.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = root / "tasks"
        folder.mkdir()
        started = time.perf_counter()
        agents = build_tasks(folder, args.tasks, rng)
        print(
            f"built {args.tasks} tasks, {len(agents)} dispatch records "
            f"in {time.perf_counter() - started:.1f} s (not measured below)"
        )
        if not args.commands_only:
            await bench_summaries(folder, args.tasks)
            await bench_record(folder, agents, rng)
            await bench_tool(root, folder, args.tasks)
        before = args.before.absolute() if args.before else None
        bench_command(project_config(root, folder), args.tasks, args.runs, before)
        if not args.commands_only:
            await bench_journal(folder)


if __name__ == "__main__":
    asyncio.run(main())
