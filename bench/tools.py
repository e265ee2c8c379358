"""Harness MCP tool latency: draft_agent return time, and list_agents with metadata.

  draft:     HarnessTools.invoke("draft_agent") with the real runtime (the CLI starts in the
             background) -> time until the tool answers with an agentId
  metadata:  list_agents for 10 live agents in 10 folders, two fields each whose command takes
             0.5 s, against collecting them one after another

Usage: .venv/bin/python bench/tools.py
"""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.agents.metadata import MetadataCollector  # noqa: E402
from harness.cli.scaffold import DEFAULTS  # noqa: E402
from harness.config.settings import MetadataField  # noqa: E402
from harness.project import build_orchestrator, load_project  # noqa: E402
from harness.runtime.claude import ClaudeRuntime  # noqa: E402
from harness.testing.held_runtime import HeldRuntime  # noqa: E402
from harness.testing.scripted_model import ScriptedModel, Turn  # noqa: E402
from harness.tools.gateway import HarnessTools  # noqa: E402

AGENTS = 10
FIELDS = [
    MetadataField("branch", "sleep 0.5; echo main", "branch", include_in_list=True),
    MetadataField("pr", "sleep 0.5; echo 42", "pull request"),
]


def make_project(root: Path) -> Path:
    config = (DEFAULTS / "config.yaml").read_text(encoding="utf-8")
    # Ten agents live at once (the default cap is 4).
    config = config.replace("maxConcurrentAgents: 4", f"maxConcurrentAgents: {AGENTS}")
    # 20 drafts in one task: no task budget, whose reservation for live agents would refuse
    # the drafts past $10 (the developer may spend $3 each).
    config = config.replace("taskBudgetUsd: 10.0", "taskBudgetUsd: null")
    (root / "config.yaml").write_text(config, encoding="utf-8")
    shutil.copytree(DEFAULTS / "roles", root / "roles")
    developer = (root / "roles" / "developer.md").read_text(encoding="utf-8")
    for n in range(AGENTS):
        (root / f"w{n}").mkdir()
        text = developer.replace("name: developer", f"name: dev{n}\ncwd: w{n}", 1)
        (root / "roles" / f"dev{n}.md").write_text(text, encoding="utf-8")
    return root / "config.yaml"


async def draft_latency(config: Path) -> None:
    async with ScriptedModel(lambda request: Turn.finish("done")) as model:
        orchestrator = build_orchestrator(load_project(config), ClaudeRuntime(base_env=model.env()))
        tools = HarnessTools(orchestrator.services)
        task = await orchestrator.tasks.create_task("bench drafts")
        samples, ids = [], []
        for n in range(20):
            started = time.perf_counter()
            reply = await tools.invoke(
                "draft_agent",
                {"role": "developer", "prompt": f"job {n}", "taskSlug": task.slug},
                None,
            )
            samples.append(time.perf_counter() - started)
            assert not reply.is_error, reply.payload
            ids.append(reply.payload["agentId"])
        for agent_id in ids:
            await orchestrator.wait(agent_id)
    print(
        f"draft_agent returns in      median {statistics.median(samples) * 1000:.1f} ms  "
        f"max {max(samples) * 1000:.1f} ms  (n={len(samples)}, agents ran in background)"
    )


async def metadata_latency(config: Path) -> None:
    runtime = HeldRuntime()
    project = load_project(config)
    project = dataclasses.replace(
        project, config=dataclasses.replace(project.config, metadata=tuple(FIELDS))
    )
    orchestrator = build_orchestrator(project, runtime)
    tools = HarnessTools(orchestrator.services)
    for n in range(AGENTS):
        await orchestrator.draft(f"dev{n}", f"work {n}")
    await runtime.wait_started(AGENTS)

    started = time.perf_counter()
    payload = (await tools.invoke("list_agents", {}, None)).payload
    parallel = time.perf_counter() - started
    assert payload["total_count"] == AGENTS
    assert all(a["metadata"] == {"branch": "main"} for a in payload["agents"])
    started = time.perf_counter()
    await tools.invoke("list_agents", {}, None)
    cached = time.perf_counter() - started

    started = time.perf_counter()
    for agent in orchestrator.agents():  # one agent, one field after another
        for field in FIELDS:
            await MetadataCollector([field], ttl_seconds=0).collect(Path(agent.cwd))
    serial = time.perf_counter() - started

    print(f"list_agents, 10 agents x 2 fields of 0.5 s: {parallel:.2f} s (parallel)")
    print(f"  the same collected one by one:  {serial:.2f} s")
    print(f"  list_agents again within the cache TTL:    {cached * 1000:.1f} ms")
    runtime.release()
    await orchestrator.shutdown()


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = make_project(Path(tmp))
        await draft_latency(config)
        await metadata_latency(config)


if __name__ == "__main__":
    asyncio.run(main())
