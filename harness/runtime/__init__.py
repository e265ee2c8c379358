"""Running agents: the spec an agent runs from, the host that runs it, and the runtimes.

An ``AgentSpec`` is plain, serialisable data (role, prompt, tools, environment, workspace
request). An ``AgentHost`` runs one from its spec: it makes the workspace, runs the agent on its
``AgentRuntime`` there, and reports the work. The orchestrator hands every agent to a
``Hosting``: the host in this process (``runtime: local``), or ``NatsHosting``, which sends it
to ``harness worker`` processes whose ``Worker`` serves the same host over NATS.

Modules: ``spec`` (the contract: AgentSpec, RunIO, RunOutcome, AgentControl, the protocols),
``host`` (AgentHost), ``backends`` (which hosting config.yaml's ``runtime:`` names, and what it
needs of this machine), ``model_access`` (whether agents here can reach a model), ``claude``
(ClaudeRuntime: starts each agent's CLI, ``cli_launch``, then hands it to the SDK's client,
``sdk_session``, the only module that drives it, imported beside the first CLI's start),
``binding`` (whose agent a CLI is), ``orphans`` (no ``claude`` process outlives the
harness), ``wire`` (the NATS protocol, pure), ``nats_link``, ``nats_hosting`` and
``worker`` (both ends over NATS; they need the ``nats`` extra).
"""

from harness.runtime.host import AgentHost, workspace_request
from harness.runtime.spec import (
    AgentControl,
    AgentRuntime,
    AgentSpec,
    Approval,
    Hosting,
    RunIO,
    RunOutcome,
    ToolDeclaration,
    ToolGateway,
    ToolReply,
    ToolUse,
)

__all__ = [
    "AgentControl",
    "AgentHost",
    "AgentRuntime",
    "AgentSpec",
    "Approval",
    "Hosting",
    "RunIO",
    "RunOutcome",
    "ToolDeclaration",
    "ToolGateway",
    "ToolReply",
    "ToolUse",
    "workspace_request",
]
