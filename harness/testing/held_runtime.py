"""A scripted AgentRuntime for tests that need live agents but not the CLI itself.

The real runtime (ClaudeRuntime) is exercised end to end elsewhere; this one lets tool and
pool tests hold agents running for as long as they need, and passes the same conformance test.
"""

from __future__ import annotations

import asyncio

from harness.runtime.spec import AgentControl, AgentSpec, RunIO, RunOutcome
from harness.tasks.model import AgentResult
from harness.waits import within


class HeldRuntime:
    """Agents run until ``release()`` (or a kill), then finish with a result echoing the prompt.
    ``release(agent_id)`` lets one agent finish, whether it has started yet or not."""

    def __init__(self) -> None:
        self.started: list[AgentSpec] = []
        self._release = asyncio.Event()
        self._released: dict[str, asyncio.Event] = {}
        self._started = asyncio.Condition()

    def release(self, agent_id: str | None = None) -> None:
        if agent_id is None:
            self._release.set()
        else:
            self._released.setdefault(agent_id, asyncio.Event()).set()

    async def wait_started(self, count: int, timeout: float = 5.0) -> None:
        async with self._started:
            await within(self._started.wait_for(lambda: len(self.started) >= count), timeout)

    async def run(self, spec: AgentSpec, control: AgentControl, io: RunIO) -> RunOutcome:
        killed = asyncio.Event()

        async def interrupt() -> None:
            killed.set()

        control.attach(interrupt)
        async with self._started:
            self.started.append(spec)
            self._started.notify_all()
        io.on_message({"type": "Started", "prompt": spec.prompt})
        own = self._released.setdefault(spec.agent_id, asyncio.Event())
        waits = [asyncio.ensure_future(e.wait()) for e in (killed, self._release, own)]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
            control.attach(None)
        if control.kill_reason is not None:
            return RunOutcome(status="killed", error=control.kill_reason)
        summary = f"did: {spec.prompt.splitlines()[-1]}"
        return RunOutcome(status="completed", result=AgentResult(summary), cost_usd=0.01, turns=1)
