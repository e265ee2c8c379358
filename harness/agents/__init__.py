"""The agents' side of the core: the orchestrator and what it runs on.

``Orchestrator`` is the one facade every front end (the CLI, the Slack bot, the harness tools)
uses; callers use its methods, never its parts (those about tasks are in ``task_methods``).
Behind it: ``dispatching`` queues a new agent within the task's caps (or follows one a worker
still runs after a restart), ``runs`` carries each agent from the queue to its final record,
``pool`` caps how many run at once (one writer per task), ``ends`` says how a dispatch record
ends (pure), ``authority`` says who may approve and stop a task's agents, ``recovery`` marks
what a stopped harness left running, ``questions`` waits on the humans of a task, ``events``
tells the front ends what happened, ``metadata`` runs the configured commands in agents'
folders.
"""

from harness.agents.dispatching import AgentHandle
from harness.agents.events import AgentEvent
from harness.agents.orchestrator import Orchestrator
from harness.agents.pool import AgentInfo
from harness.agents.questions import Answer, HumanChannel, NoHumanError, Question

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
