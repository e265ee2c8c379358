"""What the OS sandbox costs an agent run, and what it saves the humans.

The agent host runs a developer agent (the real Claude Code CLI against the scripted model)
in a task's git worktree, once sandboxed (bubblewrap, the egress proxy, the private git view)
and once with ``sandbox: off``; each run edits a file, runs a test, a lint and a commit.

  run         the whole agent run, as the host measures it (placing, running, committing)
  start       from the runtime's start to the model's first request (what the sandbox adds
              to the start: bwrap, the bridge, the proxy)
  approvals   built-in tool calls a human would have been asked about, through the real
              approvals of an orchestrator (`Approvals`), for the same scripted task

Usage: .venv/bin/python bench/sandbox.py [--runs 10]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from common import summary

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.cli.offline import scripted_env  # noqa: E402
from harness.config.roles import Role  # noqa: E402
from harness.config.settings import SandboxSettings, WorkspaceSettings  # noqa: E402
from harness.permissions.sandboxed import within_sandbox  # noqa: E402
from harness.runtime.claude import ClaudeRuntime  # noqa: E402
from harness.runtime.host import AgentHost  # noqa: E402
from harness.runtime.spec import (  # noqa: E402
    AgentControl,
    AgentSpec,
    Approval,
    RunIO,
    ToolReply,
    ToolUse,
)
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn  # noqa: E402
from harness.workspaces.manager import WorkspaceRequest, Workspaces  # noqa: E402
from tests.support import make_repository  # noqa: E402

COMMANDS = (
    "printf 'def add(a, b):\\n    return a + b\\n' > calc.py",
    "python3 -c 'import calc; assert calc.add(1, 2) == 3' && echo tested",
    "python3 -m py_compile calc.py && echo linted",
    "git add -A && git commit -qm 'add calc' && echo committed",
)


def script(request: ModelRequest) -> Turn:
    done = len(request.all_tool_results)
    if done < len(COMMANDS):
        return Turn.call("Bash", command=COMMANDS[done], description="step")
    return Turn.finish("added calc", [r.text for r in request.all_tool_results])


class Gateway:
    """Approves all, counting what the sandbox would still have asked a human."""

    def __init__(self, cwd: list[str]) -> None:
        self.cwd = cwd
        self.asked = 0

    async def call(self, agent_id: str, tool: str, args: Mapping[str, Any]) -> ToolReply:
        return ToolReply({"error": "none"}, is_error=True)

    async def approve(self, agent_id: str, tool: str, args: Mapping[str, Any]) -> Approval:
        if within_sandbox(tool, args, cwd=self.cwd[-1]) == "ask":
            self.asked += 1
        return Approval(True)


async def one_run(
    host: AgentHost, repository: Path, slug: str, sandboxed: bool, model: ScriptedModel
) -> tuple[float, float, int]:
    role = Role("developer", "Developer", "worker", "You write code.", "roles/developer.md")
    role = dataclasses.replace(role, tools=("Bash", "Read", "Write", "Edit"))
    spec = AgentSpec(
        agent_id=f"a{slug}",
        role=role,
        prompt="add calc",
        cwd="/nowhere",
        task_slug=slug,
        workspace=WorkspaceRequest("web", None, str(repository), "main"),
        sandbox=SandboxSettings(enabled=sandboxed),
    )
    cwd: list[str] = []
    gateway = Gateway(cwd)
    first: list[float] = []
    seen = len(model.requests)

    async def on_tool_use(_use: ToolUse) -> None:
        return None

    def on_placed(folder: str) -> None:
        cwd.append(folder)

    async def watch() -> None:
        await model.wait_for_request(after=seen, timeout=60)
        first.append(time.perf_counter())

    watcher = asyncio.create_task(watch())
    started = time.perf_counter()
    outcome = await host.run(
        spec, AgentControl(), RunIO(gateway, lambda _m: None, on_tool_use, on_placed)
    )
    took = time.perf_counter() - started
    await watcher
    assert outcome.status == "completed", outcome.error
    assert outcome.result is not None and "committed" in outcome.result.changes[-1]
    return took, first[0] - started, gateway.asked


async def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        repository = make_repository(base / "web")
        async with ScriptedModel(script) as model:
            runtime = ClaudeRuntime(base_env=scripted_env(model.env()))
            host = AgentHost(runtime, Workspaces(WorkspaceSettings(root=base / "workspaces")))
            await one_run(host, repository, "warm-1", True, model)  # the first CLI start
            await one_run(host, repository, "warm-2", False, model)
            results: dict[bool, list[tuple[float, float, int]]] = {True: [], False: []}
            for n in range(runs):
                for sandboxed in (n % 2 == 0, n % 2 == 1):  # alternate which goes first
                    slug = f"{'s' if sandboxed else 'u'}{n}"
                    results[sandboxed].append(
                        await one_run(host, repository, slug, sandboxed, model)
                    )
    for sandboxed, name in ((False, "unsandboxed"), (True, "sandboxed")):
        rows = results[sandboxed]
        print(summary(f"{name} run", [r[0] for r in rows]))
        print(summary(f"{name} start to 1st request", [r[1] for r in rows]))
    ratio = statistics.median(r[0] for r in results[True]) / statistics.median(
        r[0] for r in results[False]
    )
    added = statistics.median(r[1] for r in results[True]) - statistics.median(
        r[1] for r in results[False]
    )
    print(f"run time, sandboxed / unsandboxed: {ratio:.3f}")
    print(f"start, added by the sandbox: {added * 1000:.0f} ms (median)")
    print(f"approvals asked, sandboxed task: {max(r[2] for r in results[True])} per run")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    asyncio.run(main(parser.parse_args().runs))
