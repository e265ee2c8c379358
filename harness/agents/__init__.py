"""The agents' side of the core: the orchestrator and what it runs on.

``Orchestrator`` is the one facade every front end (the CLI, the Slack bot, the harness tools)
uses; callers use its methods, never its parts. Behind it: ``runs`` carries each agent from the
queue to its final record, ``pool`` caps how many run at once (one writer per task),
``ends`` says how a dispatch record ends (pure), ``recovery`` marks what a stopped harness
left running, ``questions`` waits on the humans of a task, ``events`` tells the front ends what
happened, ``metadata`` runs the configured commands in agents' folders.
"""

from harness.agents.events import AgentEvent
from harness.agents.orchestrator import AgentHandle, Orchestrator
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
