"""Agents on workers over NATS against agents in this process, on loopback.

One orchestrator (as the bot builds it) with the local runtime, and one whose runtime is NATS
(a real nats-server with JetStream in a temp folder) with `harness worker` processes; the
agents are the real Claude Code CLI against the scripted model.

  overhead:  one-turn agents through Orchestrator.run, local and remote alternating
  kill:      Orchestrator.kill of a remote agent whose model turn stalls -> its claude child
             (a child of the worker) gone, polled in /proc every millisecond
  scale:     20 agents whose model turn takes 1 s, on 2 workers of 10 slots vs 1 worker of 10
  memory:    the orchestrator's RSS idle, and with 20 remote agents at work

Usage: .venv/bin/python bench/remote.py [--runs 10] [--agents 20]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

from common import copy_project, summary

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.agents.orchestrator import Orchestrator  # noqa: E402
from harness.project import Project, build_orchestrator, load_project  # noqa: E402
from harness.runtime.claude import ClaudeRuntime  # noqa: E402
from harness.runtime.nats_hosting import NatsHosting  # noqa: E402
from harness.runtime.nats_link import NatsSettings  # noqa: E402
from harness.testing.nats_server import NatsServer  # noqa: E402
from harness.testing.processes import claude_children  # noqa: E402
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn  # noqa: E402
from harness.testing.workers import start_worker, worker_env  # noqa: E402


async def script(request: ModelRequest) -> Turn:
    text = request.first_user_text
    if "stall" in text:
        return Turn(stall_seconds=120)
    if "slow" in text:
        await asyncio.sleep(1.0)
    return Turn.finish("done", ["a change"])


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@contextlib.asynccontextmanager
async def cluster(
    project: Project, model: ScriptedModel, folder: Path, workers: int, slots: int
) -> AsyncIterator[tuple[Orchestrator, list[asyncio.subprocess.Process]]]:
    async with NatsServer(folder / f"nats-{workers}-{slots}") as nats:
        env = worker_env(model.env())
        procs = [
            await start_worker(f"w{n}", nats.url, env, folder, slots=slots) for n in range(workers)
        ]
        drains = [asyncio.ensure_future(p.stderr.read()) for p in procs if p.stderr]
        orchestrator = build_orchestrator(project, NatsHosting(NatsSettings(nats.url)))
        try:
            yield orchestrator, procs
        finally:
            await orchestrator.shutdown()
            for p in procs:
                p.terminate()
                await p.wait()
            await asyncio.gather(*drains)


async def overhead(project: Project, model: ScriptedModel, folder: Path, runs: int) -> None:
    local = build_orchestrator(project, ClaudeRuntime(base_env=model.env()))
    async with cluster(project, model, folder, 1, 4) as (remote, _):
        await remote.run("developer", "warm up")
        await local.run("developer", "warm up")
        times: dict[str, list[float]] = {"local": [], "remote": []}
        for n in range(runs):
            for name, orchestrator in (("local", local), ("remote", remote)):
                started = time.perf_counter()
                record = await orchestrator.run("developer", f"job {n}")
                assert record.status == "completed", record.error
                times[name].append(time.perf_counter() - started)
    await local.shutdown()
    for name, samples in times.items():
        print(summary(f"overhead {name}", samples))
    ratio = statistics.median(times["remote"]) / statistics.median(times["local"])
    print(f"overhead ratio remote/local (medians): {ratio:.3f}")


async def kill(project: Project, model: ScriptedModel, folder: Path, runs: int) -> None:
    samples: list[float] = []
    async with cluster(project, model, folder, 1, 2) as (orchestrator, [worker]):
        for _ in range(runs):
            asked = len(model.requests)  # this agent's model request comes after these
            handle = await orchestrator.draft("developer", "stall here")
            await model.wait_for_request(
                lambda r: "stall" in r.first_user_text, timeout=30, after=asked
            )
            children = claude_children(worker.pid)
            started = time.perf_counter()
            await orchestrator.kill(handle.agent_id, "bench")
            while claude_children(worker.pid) & children:
                await asyncio.sleep(0.001)
            samples.append(time.perf_counter() - started)
            await orchestrator.wait(handle.agent_id, 30)
    print(summary("remote kill -> child gone", samples))


async def scale(project: Project, model: ScriptedModel, folder: Path, agents: int) -> None:
    config = dataclasses.replace(
        project.config,
        mcp=dataclasses.replace(project.config.mcp, max_concurrent_agents=agents),
    )
    wide = Project(config=config, roles=project.roles)
    for workers in (1, 2):
        async with cluster(wide, model, folder, workers, 10) as (orchestrator, _):
            before = rss_mb()
            started = time.perf_counter()
            handles = [await orchestrator.draft("developer", f"slow {n}") for n in range(agents)]
            await asyncio.sleep(2.0)  # a measurement point, not a synchronisation
            busy = rss_mb()
            for h in handles:
                record = await orchestrator.wait(h.agent_id, 120)
                assert record.status == "completed", record.error
            wall = time.perf_counter() - started
        print(f"scale: {agents} agents (1 s model turn) on {workers} worker(s) x 10 slots: "
              f"{wall:.1f} s; orchestrator RSS idle {before:.0f} MB, "
              f"with agents at work {busy:.0f} MB")  # fmt: skip


async def main(runs: int, agents: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-remote-") as tmp:
        folder = Path(tmp)
        project = load_project(copy_project(folder))
        async with ScriptedModel(script) as model:
            await overhead(project, model, folder, runs)
            await kill(project, model, folder, runs)
            await scale(project, model, folder, agents)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--agents", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.agents))
