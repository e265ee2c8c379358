"""Where config.yaml's ``runtime:`` runs the agents, as a ``RuntimeBackend``: the one place
that reads its ``kind``.

``local`` runs them in this process, so this machine needs a way to reach a model; ``nats``
runs them on ``harness worker`` processes behind a NATS server, so this machine needs the
NATS client and the server. Front ends and ``harness doctor`` ask the backend what it needs
and what it is called; none of them tests the kind.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from harness.runtime.host import AgentHost
from harness.runtime.spec import AgentControl, AgentRuntime, AgentSpec, Hosting, RunIO, RunOutcome
from harness.workspaces.manager import Workspaces

if TYPE_CHECKING:
    from harness.config import RuntimeSettings
    from harness.runtime.nats_link import NatsSettings


class RuntimeBackend(Protocol):
    @property
    def name(self) -> str:
        """What people call it: ``local``, ``NATS`` (the doctor's check is named so)."""
        ...

    @property
    def where(self) -> str:
        """Where the agents run, in words for start lines: ``local``, ``NATS at nats://…``."""
        ...

    @property
    def agents_here(self) -> bool:
        """Whether this process runs the agents (and so this machine needs a model)."""
        ...

    def require(self) -> None:
        """Raises a HarnessError naming the fix when this machine lacks what the backend
        needs (the NATS client), before anything is made."""
        ...

    def hosting(self, workspaces: Workspaces, runtime: AgentRuntime | None = None) -> Hosting:
        """The agents' hosting; where they run here, on ``runtime`` (default: the Claude
        runtime, loaded when the first agent runs). Not connected yet."""
        ...

    async def probe(self, *, timeout: float, client: str) -> str:
        """Reaches where the agents run and lets go, within ``timeout`` (as ``client``): what
        was reached, in words, or a HarnessError naming the fix."""
        ...


def runtime_backend(settings: RuntimeSettings) -> RuntimeBackend:
    """The backend of config.yaml's ``runtime:``."""
    if settings.kind == "nats":
        from harness.runtime.nats_link import NatsSettings

        assert settings.url is not None  # the config's validation requires it for `nats`
        nats = NatsSettings(settings.url, settings.credentials, settings.tls_ca, settings.prefix)
        return NatsBackend(nats, lost_after=settings.lost_after_seconds)
    return LocalBackend()


class LocalBackend:
    """Agents as children of this process, on a host here."""

    name = "local"
    where = "local"
    agents_here = True

    def require(self) -> None:
        return None

    def hosting(self, workspaces: Workspaces, runtime: AgentRuntime | None = None) -> Hosting:
        return AgentHost(runtime or ClaudeRuntimeOnFirstRun(), workspaces)

    async def probe(self, *, timeout: float, client: str) -> str:
        return "agents run in this process"


class NatsBackend:
    """Agents on ``harness worker`` processes, reached through a NATS server with JetStream;
    nats-py is imported only when it is connected to."""

    name = "NATS"
    agents_here = False

    def __init__(self, settings: NatsSettings, *, lost_after: float) -> None:
        self.settings = settings
        self.lost_after = lost_after

    @property
    def where(self) -> str:
        return f"NATS at {self.settings.url}"

    def require(self) -> None:
        from harness.runtime.nats_link import require_nats

        require_nats()

    def hosting(self, workspaces: Workspaces, runtime: AgentRuntime | None = None) -> Hosting:
        # The workers run the agents in their own workspaces, on their own runtime.
        from harness.runtime.nats_hosting import NatsHosting

        return NatsHosting(self.settings, lost_after=self.lost_after)

    async def probe(self, *, timeout: float, client: str) -> str:
        from harness.runtime.nats_link import NatsLink

        self.require()
        link = await NatsLink.connect(self.settings, name=client, timeout=timeout)
        await link.close()
        return f"{self.settings.url} reachable"


class ClaudeRuntimeOnFirstRun:
    """The Claude runtime, imported when the first agent runs: the Claude SDK takes most of
    a second to import, and commands that only read tasks never need it."""

    def __init__(self) -> None:
        self._runtime: AgentRuntime | None = None

    async def run(self, spec: AgentSpec, control: AgentControl, io: RunIO) -> RunOutcome:
        if self._runtime is None:
            from harness.runtime.claude import ClaudeRuntime

            self._runtime = ClaudeRuntime()
        return await self._runtime.run(spec, control, io)
