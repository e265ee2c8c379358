"""Dispatch overhead of the harness against a bare ``claude_agent_sdk.query()``, and kill latency.

Both sides run the real Claude Code CLI against the same scripted model on loopback, one
turn ending in a StructuredOutput call, alternating so that drift hits both equally.

  in-process:  Orchestrator.run (what `harness run` does after start-up) vs query()
  command:     `python -m harness run "..."` vs `python -c <bare query() script>`, byte code
               cached: the whole run, start to the first model request, last request to exit
  kill:        Orchestrator.kill during a stalled model turn -> the claude child is gone
  start-up:    `python -m harness --help` vs `python -c pass`

Usage: .venv/bin/python bench/dispatch_overhead.py [--runs 10] [--only command] [--before DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from common import bare_query, copy_project, summary

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.project import build_orchestrator, load_project  # noqa: E402
from harness.runtime.claude import ClaudeRuntime  # noqa: E402
from harness.tasks.model import RESULT_SCHEMA  # noqa: E402
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn  # noqa: E402

BARE_SCRIPT = """
import asyncio, sys
from claude_agent_sdk import ClaudeAgentOptions, query
SCHEMA = {schema!r}
async def main():
    options = ClaudeAgentOptions(output_format={{"type": "json_schema", "schema": SCHEMA}})
    async for message in query(prompt=sys.argv[1], options=options):
        pass
asyncio.run(main())
"""


def script(request: ModelRequest) -> Turn:
    if "stall" in request.first_user_text:
        return Turn(stall_seconds=60)
    return Turn.finish("done", ["a change"])


async def in_process(model: ScriptedModel, config: Path, runs: int) -> tuple[float, float]:
    orchestrator = build_orchestrator(load_project(config), ClaudeRuntime(base_env=model.env()))
    harness_times: list[float] = []
    bare_times: list[float] = []
    for n in range(runs):
        started = time.perf_counter()
        record = await orchestrator.run("developer", f"bench run {n}")
        harness_times.append(time.perf_counter() - started)
        assert record.status == "completed", record.error
        bare_times.append(await bare_query(model.env(), f"bench run {n}"))
    print(summary("harness (in-process)", harness_times))
    print(summary("bare query() (in-process)", bare_times))
    return statistics.median(harness_times), statistics.median(bare_times)


def commands(
    model: ScriptedModel, config: Path, runs: int, before: Sequence[Path] = ()
) -> tuple[float, float]:
    """`harness run` and a bare query() script, alternating (A B A B), byte code cached (these
    machines export PYTHONDONTWRITEBYTECODE; a user's installed wheel has byte code): wall
    time, and where it goes: start to the first model request, the last request to exit; CPU
    (user + system of the command and the children it reaped: not the sandboxed CLI's, reaped
    in its sandbox). With ``before`` (older trees of the project, each put first on
    PYTHONPATH in its turn) `harness run` runs from each too, in turn."""
    env = {**os.environ, **model.env()}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    bare = BARE_SCRIPT.format(schema=RESULT_SCHEMA)

    def run(tag: str) -> list[str]:
        return [sys.executable, "-m", "harness", "run", "--config", str(config),
                "--role", "developer", tag]  # fmt: skip

    # (argv, env, cwd): `harness run` in the project's folder, not the repository, whose
    # folder `python -m` would put first on sys.path, before PYTHONPATH.
    sides: dict[str, tuple[Callable[[str], list[str]], dict[str, str], Path]] = {
        "`harness run`": (run, env, config.parent),
        "bare query()": (lambda tag: [sys.executable, "-c", bare, tag], env, REPO),
    }
    if before:
        older = {
            f"before ({tree.name}) `harness run`": (
                run,
                {**env, "PYTHONPATH": str(tree)},
                config.parent,
            )
            for tree in before
        }
        sides = {**older, "after `harness run`": sides["`harness run`"],
                 "bare query()": sides["bare query()"]}  # fmt: skip
    for name, (argv, side_env, cwd) in sides.items():  # writes the byte code; not measured
        subprocess.run(argv(f"warm-up {name}"), env=side_env, check=True, capture_output=True,
                       cwd=cwd)  # fmt: skip
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    parts = ("total", "to first request", "last request to exit", "cpu")
    taken: dict[str, dict[str, list[float]]] = {name: {p: [] for p in parts} for name in sides}
    for n in range(runs):
        for name, (argv, side_env, cwd) in sides.items():
            tag = f"bench cli {n} {name}"
            used = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.time()
            subprocess.run(argv(tag), env=side_env, check=True, capture_output=True, cwd=cwd)
            ended = time.time()
            now = resource.getrusage(resource.RUSAGE_CHILDREN)
            mine = [r.received_at for r in model.main_requests if tag in r.first_user_text]
            taken[name]["total"].append(ended - started)
            taken[name]["to first request"].append(mine[0] - started)
            taken[name]["last request to exit"].append(ended - mine[-1])
            taken[name]["cpu"].append(now.ru_utime - used.ru_utime + now.ru_stime - used.ru_stime)
    for name, samples in taken.items():
        for part, values in samples.items():
            print(summary(f"{name} {part}", values))
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    medians = {name: statistics.median(samples["total"]) for name, samples in taken.items()}
    for name, median in medians.items():
        print(f"ratio {name} / bare query(): {median / medians['bare query()']:.3f}")
    harness = "after `harness run`" if before else "`harness run`"
    return medians[harness], medians["bare query()"]


def help_startup(runs: int) -> None:
    """How long `harness --help` takes, beside the interpreter's own start."""
    samples: dict[str, list[float]] = {"`harness --help`": [], "`python -c pass`": []}
    for _ in range(runs):
        for name, argv in (
            ("`harness --help`", [sys.executable, "-m", "harness", "--help"]),
            ("`python -c pass`", [sys.executable, "-c", "pass"]),
        ):
            started = time.perf_counter()
            subprocess.run(argv, check=True, capture_output=True, cwd=REPO)
            samples[name].append(time.perf_counter() - started)
    for name, taken in samples.items():
        print(summary(name, taken))


async def kill_latency(model: ScriptedModel, config: Path, runs: int) -> list[float]:
    orchestrator = build_orchestrator(load_project(config), ClaudeRuntime(base_env=model.env()))
    samples = []
    for n in range(runs):
        before = len(model.requests)
        handle = await orchestrator.draft("developer", f"stall {n}")
        await model.wait_for_request(after=before, timeout=30)
        children = _claude_children()
        started = time.perf_counter()
        await orchestrator.kill(handle.agent_id, "bench")
        while any(Path(f"/proc/{pid}").exists() for pid in children):
            await asyncio.sleep(0.001)  # polling is fine in a bench, never in a test
        samples.append(time.perf_counter() - started)
        await orchestrator.wait(handle.agent_id)
    print(summary("kill -> child gone", samples))
    return samples


def _claude_children() -> set[int]:
    sys.path.insert(0, str(REPO))
    from harness.testing.processes import claude_children

    return claude_children()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument(
        "--only", choices=("all", "command"), default="all", help="command: `harness run` only"
    )
    parser.add_argument(
        "--before",
        type=Path,
        metavar="DIR",
        action="append",
        default=[],
        help="an older tree of the project (e.g. `git archive HEAD harness bot`, unpacked): "
        "`harness run` runs from it too, alternating with this tree's and the bare script "
        "(repeat it for more trees)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        copy_project(project)
        config = project / "config.yaml"
        async with ScriptedModel(script) as model:
            await bare_query(model.env(), "warm-up")
            if args.only == "all":
                h, b = await in_process(model, config, args.runs)
                print(f"ratio in-process: {h / b:.3f}")
            before = [tree.absolute() for tree in args.before]
            hc, bc = await asyncio.to_thread(commands, model, config, args.runs, before)
            print(f"ratio command: {hc / bc:.3f}")
            if args.only == "all":
                await kill_latency(model, config, args.runs)
        if args.only == "all":
            help_startup(args.runs)


if __name__ == "__main__":
    asyncio.run(main())
