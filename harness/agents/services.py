"""The core's services as the harness tools see them: the agents' lifecycle, tasks, humans,
pull requests, shared files and agents' metadata, each behind what it offers.

The orchestrator builds one ``Services`` and hands it to the tool provider; a tool handler
reaches only these, never the orchestrator's parts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from harness.agents.dispatching import AgentHandle
from harness.agents.humans import Humans
from harness.agents.metadata import MetadataCollector
from harness.agents.pool import AgentInfo
from harness.agents.pull_requests import PullRequests
from harness.agents.shared_files import SharedFiles
from harness.agents.task_desk import TaskDesk
from harness.clock import Clock
from harness.config.roles import Role
from harness.config.settings import Config
from harness.runtime.attachments import Attachment, LeftOut
from harness.tasks.model import DispatchRecord, Task


class AgentLifecycle(Protocol):
    """Agents drafted, awaited, stopped and listed: the orchestrator's own part."""

    @property
    def config(self) -> Config: ...

    @property
    def clock(self) -> Clock: ...

    def now(self) -> str: ...

    def role(self, name: str) -> Role: ...

    def role_names(self) -> list[str]: ...

    def route(self, text: str, last_role: str | None = None) -> str: ...

    def route_follow_up(self, task: Task, text: str) -> str: ...

    def agent(self, agent_id: str) -> AgentInfo | None: ...

    def agents(self) -> list[AgentInfo]: ...

    async def draft(
        self,
        role_name: str,
        prompt: str,
        *,
        task_slug: str | None = None,
        parent_id: str | None = None,
        repository: str | None = None,
        requested_by: str | None = None,
        attachments: Sequence[Attachment] = (),
        left_out: Sequence[LeftOut] = (),
    ) -> AgentHandle: ...

    async def wait(self, agent_id: str, timeout: float | None = None) -> DispatchRecord: ...

    async def record(self, agent_id: str) -> DispatchRecord: ...

    async def kill(self, agent_id: str, reason: str, *, by: str | None = None) -> bool: ...

    def waiting(
        self, agent_id: str | None, activity: str
    ) -> contextlib.AbstractAsyncContextManager[None]: ...

    async def report_progress(
        self, agent_id: str, message: str, percent: float | None
    ) -> DispatchRecord: ...


@dataclass(frozen=True)
class Services:
    lifecycle: AgentLifecycle
    tasks: TaskDesk
    humans: Humans
    pull_requests: PullRequests
    files: SharedFiles
    metadata: MetadataCollector

    @property
    def config(self) -> Config:
        return self.lifecycle.config

    @property
    def clock(self) -> Clock:
        """The orchestrator's: tools time their calls by it."""
        return self.lifecycle.clock
