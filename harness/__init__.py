"""harness: Slack threads become tasks worked by teams of Claude agents.

What someone embedding the harness uses (imported on first use, so ``import harness`` stays
light)::

    project = load_project(Path("config.yaml"))     config.yaml and the roles it names
    orchestrator = build_orchestrator(project)      the agents' lifecycle and the services
    handle = await orchestrator.draft("developer", "fix the login page")
    record = await orchestrator.wait(handle.agent_id)

The packages, bottom to top (each imports only those before it; ``tests/test_architecture.py``
checks it), over the leaf modules here (``errors``, ``clock``, ``retry``, ``git``...), which
import no package:

- ``permissions``: permission rules in Claude Code's syntax, and the shell reading behind them
- ``config``: config.yaml, role files, routing
- ``tasks``: the task model and the task store (task.json, journals, the audit log)
- ``sandbox``: the agents' OS sandbox (bubblewrap), the model and egress proxy
- ``boundary``: the one place what an agent wrote is opened, read or run over
- ``workspaces``: each task's git worktree or scratch folder
- ``forge``: pushing a task's branch, pull requests and their checks
- ``runtime``: the agent spec, the host that runs it, the Claude runtime, NATS and workers
- ``agents``: the orchestrator and the services it wires (tasks, humans, pull requests,
  accounts, shared files), the agents' runs, the pool, recovery, the pure policies
- ``tools``: the harness MCP tools and approvals of built-in tool calls
- ``project`` (builds an orchestrator from a config) and ``opening`` (opens the harness for
  a front end: the runtime chosen, checked and connected), then ``cli`` and ``mcp_server``

``testing`` holds the kits the tests, demos and benchmarks share (the scripted model, the held
runtime, a NATS server), above the packages it drives (below ``project``). The Slack front end
is the separate ``bot`` package; nothing here imports Slack.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from harness.version import __version__

if TYPE_CHECKING:
    from harness.agents import AgentHandle, HumanChannel, Orchestrator
    from harness.config import Config, Role
    from harness.errors import HarnessError
    from harness.project import Project, build_orchestrator, load_project
    from harness.runtime import AgentHost, AgentRuntime, AgentSpec, Hosting
    from harness.tasks import AgentResult, DispatchRecord, Task, TaskStore, ThreadRef

_EXPORTS = {
    "AgentHandle": "harness.agents",
    "AgentHost": "harness.runtime",
    "AgentResult": "harness.tasks",
    "AgentRuntime": "harness.runtime",
    "AgentSpec": "harness.runtime",
    "Config": "harness.config",
    "DispatchRecord": "harness.tasks",
    "HarnessError": "harness.errors",
    "Hosting": "harness.runtime",
    "HumanChannel": "harness.agents",
    "Orchestrator": "harness.agents",
    "Project": "harness.project",
    "Role": "harness.config",
    "Task": "harness.tasks",
    "TaskStore": "harness.tasks",
    "ThreadRef": "harness.tasks",
    "build_orchestrator": "harness.project",
    "load_project": "harness.project",
}

__all__ = [
    "AgentHandle",
    "AgentHost",
    "AgentResult",
    "AgentRuntime",
    "AgentSpec",
    "Config",
    "DispatchRecord",
    "HarnessError",
    "Hosting",
    "HumanChannel",
    "Orchestrator",
    "Project",
    "Role",
    "Task",
    "TaskStore",
    "ThreadRef",
    "__version__",
    "build_orchestrator",
    "load_project",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
