"""The agents' side of the core: the orchestrator, the services it wires, and what they run on.

``Orchestrator`` keeps the agents' lifecycle (draft, run, await, kill, list, subscribe) and
builds the services, which are its attributes and which front ends use directly:
``task_desk.TaskDesk`` (tasks, workspaces, dispatch records), ``humans.Humans`` (questions,
answers, who may decide), ``pull_requests.PullRequests``, ``account_links.AccountLinks``
(linked GitHub accounts), ``shared_files.SharedFiles`` and ``metadata.MetadataCollector``;
``services.Services`` is what the harness tools reach of them. Behind the lifecycle:
``dispatching`` queues a new agent within the task's caps (or follows one a worker still runs
after a restart), ``runs`` carries each agent from the queue to its final record,
``pending_finals`` keeps the final records the store refused until it takes them, ``pool``
caps how many run at once (one writer per task), ``ends`` says how a dispatch record ends,
``recovery`` marks what a stopped harness left running, ``questions`` waits on the humans of
a task, ``events`` tells the front ends what happened. Pure policy: ``authority`` (who may
approve and stop a task's agents), ``visibility`` (who may see a task) and
``approval_policy`` (which built-in tool call runs, is refused or is asked).

The names below are imported on first use: importing one module of the package (its events,
its pool) does not load the orchestrator and all it stands on.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.agents.dispatching import AgentHandle
    from harness.agents.events import AgentEvent
    from harness.agents.orchestrator import Orchestrator
    from harness.agents.pool import AgentInfo
    from harness.agents.questions import Answer, HumanChannel, NoHumanError, Question

_EXPORTS = {
    "AgentEvent": "harness.agents.events",
    "AgentHandle": "harness.agents.dispatching",
    "AgentInfo": "harness.agents.pool",
    "Answer": "harness.agents.questions",
    "HumanChannel": "harness.agents.questions",
    "NoHumanError": "harness.agents.questions",
    "Orchestrator": "harness.agents.orchestrator",
    "Question": "harness.agents.questions",
}

__all__ = [
    "AgentEvent",
    "AgentHandle",
    "AgentInfo",
    "Answer",
    "HumanChannel",
    "NoHumanError",
    "Orchestrator",
    "Question",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'harness.agents' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
