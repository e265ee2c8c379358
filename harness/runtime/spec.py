"""What a runtime needs to run an agent, and what it gives back: plain data and protocols.

An ``AgentSpec`` is serialisable (``to_json`` / ``from_json``, the JSON form of
``harness/serialise.py``), so a runtime in another process can run it; the agent's harness
tools are served by a ``ToolGateway`` the caller passes in. Nothing here imports the Claude
SDK, so front ends that never run an agent stay light.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from harness import serialise
from harness.config.roles import Role
from harness.config.settings import SandboxSettings
from harness.runtime.attachments import Attachment
from harness.sandbox.layout import Bind
from harness.tasks.model import AgentResult
from harness.workspaces.manager import WorkReport, WorkspaceRequest

# The agents' own MCP server: the model sees its tools as ``mcp__harness__<tool>``.
SERVER_NAME = "harness"

OutcomeStatus = Literal["completed", "failed", "killed", "interrupted"]

# In a spec's env: how often the CLI retries a failing model API call (the CLI's own variable,
# from modelApiRetries); the runtime also stops a CLI that retries more.
MODEL_API_RETRIES_ENV = "CLAUDE_CODE_MAX_RETRIES"


def qualified(tool: str) -> str:
    """The name the model sees: ``mcp__harness__draft_agent``."""
    return f"mcp__{SERVER_NAME}__{tool}"


@dataclass(frozen=True)
class ToolUse:
    """A tool call the agent is about to make (seen by a PreToolUse hook)."""

    tool_use_id: str
    name: str
    input: Mapping[str, Any]


@dataclass(frozen=True)
class ToolDeclaration:
    """A harness tool as the model sees it: plain data, so it can travel with a spec."""

    name: str
    description: str
    input_schema: Mapping[str, Any]


@dataclass(frozen=True)
class ToolReply:
    """A tool call's JSON payload; ``is_error`` makes it a tool error for the model."""

    payload: dict[str, Any]
    is_error: bool = False


@dataclass(frozen=True)
class Approval:
    """Whether an agent may make a tool call; a refusal's message reaches the agent."""

    allowed: bool
    message: str = ""


class ToolGateway(Protocol):
    """Serves the harness tool calls of agents and decides whether a built-in tool call may
    run; the runtime names the calling agent."""

    async def call(self, agent_id: str, tool: str, args: Mapping[str, Any]) -> ToolReply: ...

    async def approve(self, agent_id: str, tool: str, args: Mapping[str, Any]) -> Approval: ...


@dataclass(frozen=True)
class AgentSpec:
    """Everything a runtime needs to run one agent, as plain serialisable data: a runtime
    in another process can rebuild it from ``to_json()``."""

    agent_id: str
    role: Role
    prompt: str
    cwd: str
    # The harness tools offered to this agent (its access profile), served by the gateway.
    harness_tools: tuple[ToolDeclaration, ...] = ()
    # What the harness sets for the agent's CLI, over its role's ``env``. Of the runtime's own
    # environment, the agent gets only an allow-list (``harness/sandbox/environment.py``),
    # with ``sandbox.pass_env``'s names.
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # The task the agent works on (a runtime elsewhere names its folder after it).
    task_slug: str = ""
    # For a runtime elsewhere: the git workspace to make there (None: a scratch folder).
    workspace: WorkspaceRequest | None = None
    # The OS sandbox the agent runs in (config's `sandbox:`).
    sandbox: SandboxSettings = dataclasses.field(default_factory=SandboxSettings)
    # Set by the host that places the agent: what its sandbox shows writable (the working
    # folder, the parts of its git the agent may write), in order, and the environment its
    # git needs there. Empty: the working folder alone.
    mounts: tuple[Bind, ...] = ()
    mount_env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # The harness's own files (config, roles, tasks, workspaces): hidden in the sandbox
    # where the agent's folder would show them (a role whose folder is the project's).
    hidden: tuple[str, ...] = ()
    # Set by the host: a folder of this run's own for what the CLI writes when it runs
    # outside the sandbox (transcripts), under the host's data folder; removed after it.
    cli_state: str | None = None
    # Files a person attached to the request: written into the working folder by the host
    # that places it, images also shown to the model (``runtime/attachments.py``).
    attachments: tuple[Attachment, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return serialise.to_json(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AgentSpec:
        return serialise.from_json(cls, data)

    @property
    def harness_tool_names(self) -> tuple[str, ...]:
        """The names the model sees: ``mcp__harness__draft_agent``."""
        return tuple(qualified(t.name) for t in self.harness_tools)


@dataclass(frozen=True)
class RunOutcome:
    status: OutcomeStatus
    result: AgentResult | None = None
    error: str | None = None
    last_text: str | None = None
    cost_usd: float | None = None
    turns: int | None = None
    duration_ms: int = 0
    # What the agent changed, when it worked in a git workspace on another machine.
    work: WorkReport | None = None


class AgentControl:
    """Shared between the pool and a running agent: kill requests and live activity."""

    def __init__(self) -> None:
        self.kill_reason: str | None = None
        self.activity: str = "starting"
        # Where the agent runs, when not in this process (a worker's name).
        self.worker: str | None = None
        self._interrupt: Callable[[], Awaitable[None]] | None = None

    @property
    def kill_requested(self) -> bool:
        return self.kill_reason is not None

    def attach(self, interrupt: Callable[[], Awaitable[None]] | None) -> None:
        self._interrupt = interrupt

    async def kill(self, reason: str) -> None:
        """Ask the agent to stop; the runtime's run() then returns a ``killed`` outcome."""
        first = self.kill_reason is None
        self.kill_reason = reason if first else self.kill_reason
        if first and self._interrupt is not None:
            await self._interrupt()


MessageSink = Callable[[dict[str, Any]], None]
ToolUseSink = Callable[[ToolUse], Awaitable[None]]


@dataclass(frozen=True)
class RunIO:
    """Where a running agent reaches the harness: its harness tool calls and approvals go to
    ``tools``, each SDK message (as JSON) to ``on_message``, each tool call it is about to
    make to ``on_tool_use``, and the folder its host placed it in to ``on_placed`` (on a
    worker, a folder of that machine: approvals judge paths against it)."""

    tools: ToolGateway
    on_message: MessageSink
    on_tool_use: ToolUseSink
    on_placed: Callable[[str], None] = lambda _cwd: None


@dataclass(frozen=True)
class SpareLimits:
    """What a host's idle spares may hold in all: how many, and how much resident memory
    (MB); None: no cap. ``settle_seconds``: how long after agents last queued for a slot
    no spare starts (a burst's last agents end one by one: a spare started between their
    ends takes the CPU they need and serves nobody)."""

    max_idle: int | None = None
    max_memory_mb: int | None = None
    settle_seconds: float = 3.0


class AgentRuntime(Protocol):
    """Runs one agent in the folder its spec names (already made) to its outcome."""

    async def run(self, spec: AgentSpec, control: AgentControl, io: RunIO) -> RunOutcome: ...


@runtime_checkable
class Hosting(Protocol):
    """Where the orchestrator's agents run: a host in this process, or hosts on workers
    elsewhere. Either takes a spec with its workspace request and returns the outcome with
    where the work is; the orchestrator never knows which."""

    async def connect(self) -> None:
        """Reaches where the agents run, now: a HarnessError naming the fix within seconds
        when it cannot, so a front end fails at its start rather than at its first agent.
        Nothing to reach for a host in this process."""
        ...

    def problem(self) -> str | None:
        """Why agents cannot be run now (the NATS server is away), for a readiness check;
        None when they can."""
        ...

    async def run(self, spec: AgentSpec, control: AgentControl, io: RunIO) -> RunOutcome: ...

    @property
    def agents_outlive_harness(self) -> bool:
        """Whether running agents go on when the harness process stops (workers elsewhere)."""
        ...

    async def still_running(self, agent_id: str) -> bool:
        """After a restart: whether the agent still runs (or ran to its end) somewhere."""
        ...

    async def adopt(
        self, spec: AgentSpec, control: AgentControl, io: RunIO, *, seen_messages: int
    ) -> RunOutcome:
        """Follows an agent that runs since before this process started, to its end; its
        first ``seen_messages`` journal lines were recorded already."""
        ...

    def keep_warm(
        self,
        templates: Sequence[tuple[AgentSpec, int]],
        follow_ups: int = 0,
        *,
        limits: SpareLimits | None = None,
        busy: Callable[[], bool] | None = None,
    ) -> None:
        """Keeps agents of these templates started ahead (spares), a count each, where the
        hosts can, and one for the next follow-up of each of the ``follow_ups`` tasks last
        worked on; a dispatch that fits one starts at once. ``limits`` caps what idle
        spares hold; while ``busy()`` (agents queue for a slot) no spare starts."""
        ...

    def start_ahead(self, template: AgentSpec) -> None:
        """Starts one agent of ``template`` ahead for a dispatch about to be made, where
        it would run here (a process that lives for one agent): not replaced once used."""
        ...

    async def close(self) -> None:
        """Lets go of the agents (those that outlive the harness go on); safe to call
        twice."""
        ...
