"""``open_harness``: the runtime config.yaml names, chosen, checked and connected for what a
front end opens the harness for; leaving shuts it down."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.config import RuntimeSettings
from harness.errors import HarnessError
from harness.opening import open_harness
from harness.project import Project
from harness.runtime.model_access import KEY_VARIABLES, PROVIDER_SWITCHES
from harness.sandbox import runner
from harness.testing.held_runtime import HeldRuntime
from harness.testing.nats_server import free_port

pytestmark = pytest.mark.anyio


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A machine where nothing gives the agents a model."""
    for name in (*KEY_VARIABLES, *PROVIDER_SWITCHES, "CLAUDE_CONFIG_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def on_nats(project: Project, url: str) -> Project:
    runtime = RuntimeSettings(kind="nats", url=url)
    return dataclasses.replace(project, config=dataclasses.replace(project.config, runtime=runtime))


def closed_url() -> str:
    return f"nats://127.0.0.1:{free_port()}"


async def test_reading_tasks_checks_and_connects_nothing(project: Project, no_model: None) -> None:
    said: list[str] = []
    async with open_harness(project, say=said.append) as harness:
        assert harness.where == "local"
        assert await harness.orchestrator.tasks.task_summaries() == []
    url = closed_url()
    async with open_harness(on_nats(project, url), say=said.append) as harness:
        assert harness.where == f"NATS at {url}"
        assert harness.orchestrator.runtime_problem() == f"NATS at {url} not connected"
    assert said == []


async def test_running_agents_here_needs_a_model_before_anything_is_made(
    project: Project, no_model: None
) -> None:
    with pytest.raises(HarnessError) as caught:
        async with open_harness(project, purpose="run"):
            pytest.fail("opened without a model")

    assert "no way to reach a model" in caught.value.message
    assert "harness run --scripted" in caught.value.fix
    assert not project.config.tasks_dir.exists()


async def test_a_server_or_agents_on_a_runtime_of_the_callers_need_no_model_here(
    project: Project, no_model: None
) -> None:
    async with open_harness(project, purpose="serve") as harness:
        assert harness.orchestrator.runtime_problem() is None
    held = HeldRuntime()
    async with open_harness(on_nats(project, closed_url()), purpose="run", runtime=held) as h:
        assert h.where == "local"  # the runtime given runs them here, whatever config says
        handle = await h.orchestrator.draft("developer", "fix the login bug")
        held.release()
        record = await h.orchestrator.wait(handle.agent_id, 10)
    assert record.status == "completed"


async def test_scripted_agents_run_here_offline(project: Project, no_model: None) -> None:
    async with open_harness(on_nats(project, closed_url()), purpose="run", scripted=True) as h:
        assert h.where == "local"
        assert h.orchestrator.runtime_problem() is None


@pytest.mark.waits
async def test_running_agents_on_workers_connects_first_and_says_so(project: Project) -> None:
    pytest.importorskip("nats")
    url = closed_url()
    said: list[str] = []
    with pytest.raises(HarnessError) as caught:
        async with open_harness(on_nats(project, url), purpose="run", say=said.append):
            pytest.fail("opened without NATS")

    assert said == [f"connecting to NATS at {url}"]
    assert f"cannot connect to NATS at {url}" in caught.value.message
    assert "nats-server -js" in caught.value.fix
    assert not project.config.tasks_dir.exists()


async def test_without_the_nats_client_it_says_so_before_connecting(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    def missing() -> None:
        raise HarnessError("the NATS runtime needs the nats-py package", fix="pip install")

    monkeypatch.setattr("harness.runtime.nats_link.require_nats", missing)
    said: list[str] = []
    with pytest.raises(HarnessError, match="nats-py"):
        async with open_harness(on_nats(project, closed_url()), purpose="serve", say=said.append):
            pytest.fail("opened without nats-py")
    assert said == []


async def test_leaving_after_the_front_ends_own_shutdown_is_quiet(project: Project) -> None:
    held = HeldRuntime()
    async with open_harness(project, purpose="serve", runtime=held) as harness:
        handle = await harness.orchestrator.draft("developer", "fix the login bug")
        await held.wait_started(1)
        await harness.orchestrator.shutdown("the bot was stopped", leave_remote_agents=True)
    record = await harness.orchestrator.record(handle.agent_id)
    assert record.status == "interrupted"


@pytest.fixture
def refusing_bubblewrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A bubblewrap that cannot make namespaces here (as in some containers); each start
    is a line in the file yielded (the checks are cached per process: cleared around)."""
    starts = tmp_path / "bwrap-starts"
    bwrap = tmp_path / "bwrap"
    bwrap.write_text(
        f'#!/bin/sh\necho started >> "{starts}"\n'
        'echo "bwrap: setting up uid map: Permission denied" >&2\nexit 1\n',
        encoding="utf-8",
    )
    bwrap.chmod(0o755)
    runner.SANDBOX_CHECK.forget()
    monkeypatch.setattr(runner, "bwrap_binary", lambda: str(bwrap))
    yield starts
    runner.SANDBOX_CHECK.forget()


@pytest.mark.subprocess
async def test_the_sandbox_is_checked_while_the_harness_opens_and_its_refusal_stops_a_writer(
    project: Project, refusing_bubblewrap: Path
) -> None:
    async with open_harness(project, purpose="run", scripted=True) as harness:
        # Checked once, while the Claude SDK loaded: the first agent does not wait for it.
        assert refusing_bubblewrap.read_text("utf-8").splitlines() == ["started"]
        handle = await harness.orchestrator.draft("developer", "fix the login bug")
        record = await harness.orchestrator.wait(handle.agent_id, 60)

    assert record.status == "failed"
    assert record.error is not None
    assert record.error.startswith("the agent's OS sandbox cannot start here: ")
    assert "Permission denied" in record.error
    assert refusing_bubblewrap.read_text("utf-8").splitlines() == ["started"]  # not again
