"""Opening the harness for a front end: the runtime config.yaml names, checked and connected,
with the orchestrator over it; leaving shuts them down.

The CLI, the MCP server and the bot name no runtime. They say what they open the harness for
(``Purpose``); ``open_harness`` chooses the hosting (``harness/runtime/backends.py``), checks
what it needs of this machine before anything is made, and connects it, so a missing key or
an unreachable NATS server is said at once with its fix, and no task is left half made.
The OS sandbox is not a precondition: agents that only read run without it where it cannot
start (``harness/sandbox/runner.py``), and ``harness doctor`` reports it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from harness.agents.orchestrator import Orchestrator
from harness.clock import SYSTEM, Clock
from harness.project import Project, build_orchestrator, configured_hosting, task_store
from harness.runtime.backends import runtime_backend
from harness.runtime.model_access import require_model_access, scripted_env
from harness.runtime.spec import AgentRuntime
from harness.sandbox.runner import probe_ahead
from harness.tasks.nats_store import NatsTaskStore
from harness.workspaces.manager import Workspaces

# What a front end opens the harness for:
# - "read": commands on tasks. Nothing is checked or connected ahead; the Claude runtime is
#   loaded if an agent runs, when it does.
# - "run": agents run now (`harness run`, `harness mcp`). Agents that run here must reach a
#   model; the runtime is loaded now (an agent can start ahead) and the workers' server is
#   connected.
# - "serve": a server (the bot). As "run", but a model is not required here at start: a
#   role's env may give one (`harness doctor` checks).
Purpose = Literal["read", "run", "serve"]


@dataclass(frozen=True)
class Harness:
    orchestrator: Orchestrator
    # Where its agents run, in words for start lines: "local", "NATS at nats://…".
    where: str


def _quiet(_line: str) -> None:
    return None


@contextlib.asynccontextmanager
async def open_harness(
    project: Project,
    *,
    purpose: Purpose = "read",
    scripted: bool = False,
    model_env: Mapping[str, str] | None = None,
    runtime: AgentRuntime | None = None,
    simulated_costs: bool = False,
    say: Callable[[str], None] = _quiet,
    clock: Clock = SYSTEM,
) -> AsyncIterator[Harness]:
    """The orchestrator over the agents' runtime, opened for ``purpose``. Leaving shuts the
    orchestrator down (nothing more when the front end did, with its own reason), then lets
    go of the hosting and the scripted model.

    Its agents run where config.yaml's ``runtime:`` says, unless given one here: ``scripted``
    runs them on the shipped scripted model (offline, costs simulated), ``model_env`` on the
    Claude runtime with that environment over this process's (a model of the caller's),
    ``runtime`` on that runtime. ``simulated_costs`` marks every cost simulated. ``say`` is
    told, in words, what takes a while before the harness is open (connecting). ``clock``
    is every part's time (the runtime, the workspaces, the orchestrator). A HarnessError
    says what is missing, and how to fix it, before anything is made."""
    config = project.config
    backend = runtime_backend(config.runtime)
    sandboxed = config.sandbox.enabled
    async with contextlib.AsyncExitStack() as stack:
        if scripted:
            model_env = await stack.enter_async_context(_scripted_model())
            simulated_costs = True
        if runtime is None and model_env is not None:
            runtime = await _claude_runtime(model_env, clock, purpose, sandboxed)
        here = runtime is not None or backend.agents_here
        if purpose != "read":
            if here:
                if runtime is None and purpose == "run":
                    require_model_access(os.environ, Path.home())
                # Loaded now: an agent can start ahead, and no first request waits on the
                # Claude SDK's import.
                runtime = runtime or await _claude_runtime({}, clock, purpose, sandboxed)
            else:
                backend.require()
        workspaces = Workspaces(config.workspaces, clock)
        hosting = configured_hosting(config.runtime, workspaces, runtime)
        stack.push_async_callback(hosting.close)
        if purpose != "read":
            if not here:
                say(f"connecting to {backend.where}")
            await hosting.connect()
        store = task_store(config, clock)
        if purpose != "read" and isinstance(store, NatsTaskStore):
            # A task store out of reach is said now, with its fix, not at the first task.
            stack.push_async_callback(store.close)
            say(f"connecting to the task store, {store.where}")
            await store.buckets()
        orchestrator = build_orchestrator(
            project,
            hosting,
            workspaces=workspaces,
            simulated_costs=simulated_costs,
            clock=clock,
            store=store,
        )
        stack.push_async_callback(orchestrator.shutdown)
        yield Harness(orchestrator, where="local" if here else backend.where)


async def _claude_runtime(
    model_env: Mapping[str, str], clock: Clock, purpose: Purpose, sandboxed: bool
) -> AgentRuntime:
    from harness.runtime.claude import ClaudeRuntime, sdk_session_module

    # Opened for agents, the sandbox's check (a bubblewrap process, about 0.1 s) runs now.
    # A server also imports the Claude SDK now (most of a second, in a thread, beside the
    # check), so that no request waits on it; `harness run` and `harness mcp` import it
    # once their first agent's CLI has started, while that CLI starts.
    probe = probe_ahead() if purpose != "read" and sandboxed else None
    try:
        if purpose == "serve":
            await sdk_session_module()
    finally:
        if probe is not None:
            await asyncio.to_thread(probe.end)
    # A server's spares are primed (their CLI's first turn run ahead) for requests that come
    # later. Opened to run agents (`harness run`, `harness mcp`), the only spare is the one
    # started ahead for the agent about to start: priming it would delay that agent's turn.
    return ClaudeRuntime(base_env=model_env, clock=clock, prime_spares=purpose == "serve")


@contextlib.asynccontextmanager
async def _scripted_model() -> AsyncIterator[dict[str, str]]:
    """The agents' environment for the shipped scripted model, on loopback while open
    (``demo_script``: an analyst drafts and awaits a developer, other roles report at once)."""
    from harness.testing.scripted_model import ScriptedModel, demo_script

    async with ScriptedModel(demo_script) as model:
        yield scripted_env(model.env())
