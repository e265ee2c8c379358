"""A model API that cannot be reached: every retry of the real CLI shows at once as the
agent's progress (for the terminal and the Slack status), and the agent fails after the
configured number of retries, saying why."""

from __future__ import annotations

import dataclasses
import os
import socket
import sys
import time
from pathlib import Path

import pytest
from claude_agent_sdk import (
    AssistantMessage,
    ResultMessage,
    SystemMessage,
    TextBlock,
)
from claude_agent_sdk.types import AssistantMessageError

from harness.agents.events import AgentEvent
from harness.config.settings import parse_config
from harness.errors import ConfigError
from harness.project import Project, build_orchestrator
from harness.runtime.agent_stream import RunTracker
from harness.runtime.claude import ClaudeRuntime
from harness.runtime.cli_launch import CliOptions
from harness.runtime.spec import MODEL_API_RETRIES_ENV, AgentControl, AgentSpec
from harness.tasks.journal import api_retry_in
from harness.testing import spawn
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn

pytestmark = pytest.mark.anyio


def closed_port() -> int:
    """A loopback port nobody listens on: connections are refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def unreachable_model() -> dict[str, str]:
    return {"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{closed_port()}", "ANTHROPIC_API_KEY": "x"}


def test_a_retry_notice_of_the_cli_becomes_a_progress_line() -> None:
    notice = {"type": "SystemMessage", "subtype": "api_retry",
              "data": {"attempt": 3, "max_retries": 10, "error_status": 529}}  # fmt: skip
    refused = {"type": "SystemMessage", "subtype": "api_retry",
               "data": {"attempt": 1, "max_retries": 2, "error": "unknown"}}  # fmt: skip

    assert api_retry_in(notice) == "model API unreachable (HTTP 529), retrying 3/10"
    assert api_retry_in(refused) == "model API unreachable (no connection), retrying 1/2"
    assert api_retry_in({"type": "SystemMessage", "subtype": "init", "data": {}}) is None


@pytest.mark.parametrize("bad", [-1, 16, "ten"])  # 16: the CLI would clamp it to 15
def test_a_retry_limit_outside_zero_to_fifteen_is_an_error_naming_file_field_and_fix(
    tmp_path: Path, bad: object
) -> None:
    file = tmp_path / "config.yaml"
    assert parse_config({}, file=file).model_api_retries == 10
    assert parse_config({"modelApiRetries": 0}, file=file).model_api_retries == 0
    assert parse_config({"modelApiRetries": 15}, file=file).model_api_retries == 15
    with pytest.raises(ConfigError) as error:
        parse_config({"modelApiRetries": bad}, file=file)

    assert error.value.field == "modelApiRetries"
    assert str(file) in str(error.value)
    assert "modelApiRetries: 10" in error.value.fix


def _retry(attempt: int, limit: int) -> SystemMessage:
    data = {"type": "system", "subtype": "api_retry", "attempt": attempt, "max_retries": limit,
            "retry_delay_ms": 500, "error_status": None, "error": "unknown"}  # fmt: skip
    return SystemMessage(subtype="api_retry", data=data)


def _said(text: str, *, error: AssistantMessageError | None = None) -> AssistantMessage:
    return AssistantMessage(content=[TextBlock(text=text)], model="m", error=error)


def _ended(subtype: str) -> ResultMessage:
    return ResultMessage(subtype=subtype, duration_ms=1, duration_api_ms=0, is_error=True,
                         num_turns=1, session_id="s")  # fmt: skip


def test_each_retry_notice_is_the_agent_activity_at_once() -> None:
    control = AgentControl()
    tracker = RunTracker(control, retry_limit=10)

    tracker.observe(_retry(3, 10))

    assert control.activity == "model API unreachable (no connection), retrying 3/10"
    assert not tracker.over_retry_limit


def test_a_run_that_ends_after_its_last_retry_blames_the_unreachable_model_api() -> None:
    tracker = RunTracker(AgentControl(), retry_limit=2, model_api="http://127.0.0.1:9")
    for message in (_retry(1, 2), _retry(2, 2), _said("API Error: refused", error="unknown")):
        tracker.observe(message)
    tracker.observe(_ended("success"))

    error = tracker.outcome(1).error
    assert not tracker.over_retry_limit
    assert error is not None
    assert error.startswith(
        "the model API was unreachable after 2 retries (no connection to http://127.0.0.1:9;"
    )
    assert "ANTHROPIC_BASE_URL" in error and "The CLI said: API Error: refused" in error


def test_a_cli_that_retries_past_the_limit_is_to_be_stopped_and_blamed_at_the_limit() -> None:
    tracker = RunTracker(AgentControl(), retry_limit=2)
    for attempt in (1, 2):
        tracker.observe(_retry(attempt, 10))
        assert not tracker.over_retry_limit

    tracker.observe(_retry(3, 10))  # its second retry failed too
    tracker.observe(_ended("error_during_execution"))  # what the interrupt ends with

    assert tracker.over_retry_limit
    error = tracker.outcome(1).error
    assert error is not None
    assert error.startswith("the model API was unreachable after 2 retries (no connection;")
    assert error.endswith("The CLI went on retrying (3/10) and was stopped.")


def test_a_run_whose_model_api_recovered_does_not_blame_it_for_a_later_failure() -> None:
    tracker = RunTracker(AgentControl())
    for message in (_retry(1, 10), _said("working on it"), _ended("error_max_turns")):
        tracker.observe(message)

    error = tracker.outcome(1).error
    assert error is not None and error.startswith("it reached the role's maxTurns limit")


@pytest.mark.slow
async def test_each_retry_shows_at_once_and_the_agent_fails_by_the_limit(
    project: Project,
) -> None:
    config = dataclasses.replace(project.config, model_api_retries=2)
    model = unreachable_model()
    orchestrator = build_orchestrator(Project(config, project.roles), ClaudeRuntime(base_env=model))
    progress: list[str] = []
    status_lines: list[str] = []  # what the Slack status shows, read as the bot reads it

    def seen(event: AgentEvent) -> None:
        if event.kind == "progress" and event.record.progress is not None:
            progress.append(event.record.progress.message)
            status_lines.extend(a.activity for a in orchestrator.agents())

    orchestrator.subscribe(seen)
    started = time.monotonic()
    record = await orchestrator.run("developer", "say hello")
    took = time.monotonic() - started
    await orchestrator.shutdown()

    assert progress == [
        "model API unreachable (no connection), retrying 1/2",
        "model API unreachable (no connection), retrying 2/2",
    ]
    assert status_lines == progress
    assert record.status == "failed"
    assert record.error is not None
    url = model["ANTHROPIC_BASE_URL"]
    assert record.error.startswith(
        f"the model API was unreachable after 2 retries (no connection to {url};"
    )
    assert "modelApiRetries" in record.error and "ANTHROPIC_BASE_URL" in record.error
    # Through the sandbox's proxy the CLI sees its connection dropped, not refused.
    assert "The CLI said: API Error: Connection" in record.error
    assert took < 60  # not the minutes of the CLI's own default


@pytest.mark.slow
async def test_an_overloaded_model_api_shows_its_retries_and_the_agent_goes_on_once_it_answers(
    project: Project,
) -> None:
    def script(request: ModelRequest) -> Turn:
        return Turn.fail(529) if request.index < 2 else Turn.finish("hello")

    async with ScriptedModel(script) as model:
        orchestrator = build_orchestrator(project, ClaudeRuntime(base_env=model.env()))
        progress: list[str] = []
        orchestrator.subscribe(
            lambda e: (
                progress.append(e.record.progress.message)
                if e.kind == "progress" and e.record.progress is not None
                else None
            )
        )
        record = await orchestrator.run("developer", "say hello")
        await orchestrator.shutdown()

    assert progress == [
        "model API unreachable (HTTP 529), retrying 1/10",
        "model API unreachable (HTTP 529), retrying 2/10",
    ]
    assert record.status == "completed", record.error
    assert record.result is not None and record.result.summary == "hello"


class UntoldRuntime(ClaudeRuntime):
    """Leaves the spec's retry limit out of what it sets for the CLI; the runtime knows it."""

    def cli_options(self, spec: AgentSpec, cli_path: str) -> CliOptions:
        options = super().cli_options(spec, cli_path)
        env = {k: v for k, v in options.env.items() if k != MODEL_API_RETRIES_ENV}
        return dataclasses.replace(options, env=env)


@pytest.mark.slow
async def test_a_cli_not_told_the_limit_is_stopped_by_the_runtime_at_the_limit(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The CLI is not told modelApiRetries (it gets the process's CLAUDE_CODE_MAX_RETRIES,
    # its own default of 10): the runtime stops it after modelApiRetries all the same.
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "10")
    config = dataclasses.replace(project.config, model_api_retries=1)

    async with ScriptedModel(lambda _request: Turn.fail(500)) as model:
        orchestrator = build_orchestrator(
            Project(config, project.roles), UntoldRuntime(base_env=model.env())
        )
        started = time.monotonic()
        record = await orchestrator.run("developer", "say hello")
        took = time.monotonic() - started
        await orchestrator.shutdown()
        asked = len(model.main_requests)

    assert record.status == "failed"
    assert record.error is not None
    assert record.error.startswith(
        f"the model API was unreachable after 1 retry (HTTP 500 from {model.base_url};"
    )
    assert record.error.endswith("The CLI went on retrying (2/10) and was stopped.")
    assert asked == 2  # the call and its one retry; the CLI was stopped before the next
    assert took < 30  # its remaining eight retries would take over two minutes


@pytest.mark.slow
def test_harness_run_prints_each_retry_on_stderr(project_dir: Path) -> None:
    config = project_dir / "config.yaml"
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace("modelApiRetries: 10", "modelApiRetries: 1"), encoding="utf-8")
    done = spawn.run(
        [sys.executable, "-m", "harness", "run", "--role", "developer", "say hello",
         "--config", str(config)],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, **unreachable_model()},
    )  # fmt: skip

    assert done.returncode == 1
    assert "model API unreachable (no connection), retrying 1/1" in done.stderr
    assert "the model API was unreachable after 1 retry " in done.stdout + done.stderr
