"""What every AgentRuntime must do for the orchestrator, as one pytest suite each runtime runs.

Subclass ``RuntimeConformance`` in a test module (its name starting with ``Test``) and give it
a ``subject`` fixture yielding a ``RuntimeSubject``: an orchestrator over a fresh runtime whose
agents stay busy until released, and the means to see the runtime itself at work. pytest runs
every test below against it.

A kill must be tested on an agent the runtime is really running: one killed while still queued
is ended by the orchestrator's pool, and never reaches the runtime at all.
"""

from __future__ import annotations

from typing import Protocol

import pytest

from harness.agents.orchestrator import Orchestrator

WAIT = 30.0  # bounded waits: a real runtime may start a process for each agent


class RuntimeSubject(Protocol):
    """An orchestrator over the runtime under test, and what the suite observes it by."""

    @property
    def orchestrator(self) -> Orchestrator: ...

    @property
    def spawns_processes(self) -> bool:
        """True when each running agent is an OS process (then ``processes`` must see it)."""
        ...

    def release(self) -> None:
        """Lets the agents, running or to come, finish with a result echoing their prompt's
        last line (``did: <line>``); until then they stay busy."""

    async def reached(self, agent_id: str, timeout: float) -> bool:
        """Waits until the runtime itself runs the agent (e.g. its model request arrived);
        False when it did not within ``timeout`` seconds."""
        ...

    def processes(self) -> set[int]:
        """The OS processes the runtime runs agents in now (empty for in-process agents)."""
        ...


@pytest.mark.anyio
class RuntimeConformance:
    """The AgentRuntime contract. Subclasses provide the ``subject`` fixture."""

    async def test_a_released_agent_completes_with_its_result(
        self, subject: RuntimeSubject
    ) -> None:
        subject.release()
        record = await subject.orchestrator.run("developer", "write the code")

        assert record.status == "completed", record.error
        assert record.result is not None
        assert record.result.summary == "did: write the code"
        assert subject.orchestrator.agents() == []

    async def test_a_running_agent_killed_ends_killed_with_the_reason_and_nothing_left(
        self, subject: RuntimeSubject
    ) -> None:
        orchestrator = subject.orchestrator
        handle = await orchestrator.draft("developer", "hold on")
        assert await subject.reached(handle.agent_id, WAIT), "the runtime never ran the agent"
        running = subject.processes()
        assert bool(running) == subject.spawns_processes

        assert await orchestrator.kill(handle.agent_id, "changed my mind")
        record = await orchestrator.wait(handle.agent_id, WAIT)

        assert (record.status, record.error) == ("killed", "changed my mind")
        assert orchestrator.agents() == []
        assert not running & subject.processes()
