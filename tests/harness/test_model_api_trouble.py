"""A model API that cannot be reached: every retry of the real CLI shows at once as the
agent's progress (for the terminal and the Slack status), and the agent fails after the
configured number of retries, saying why."""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.config import parse_config
from harness.errors import ConfigError
from harness.events import AgentEvent
from harness.journal import api_retry_in
from harness.project import Project, build_orchestrator
from harness.runtime import ClaudeRuntime

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


def test_the_retry_limit_is_a_count_from_zero_to_fifteen(tmp_path: Path) -> None:
    file = tmp_path / "config.yaml"
    assert parse_config({}, file=file).model_api_retries == 10
    assert parse_config({"modelApiRetries": 0}, file=file).model_api_retries == 0
    with pytest.raises(ConfigError) as error:
        parse_config({"modelApiRetries": -1}, file=file)
    with pytest.raises(ConfigError):
        parse_config({"modelApiRetries": 16}, file=file)  # the CLI would clamp it to 15

    assert error.value.field == "modelApiRetries"
    assert str(file) in str(error.value)


@pytest.mark.slow
async def test_each_retry_shows_at_once_and_the_agent_fails_by_the_limit(
    project: Project,
) -> None:
    config = dataclasses.replace(project.config, model_api_retries=2)
    orchestrator = build_orchestrator(
        Project(config, project.roles), ClaudeRuntime(base_env=unreachable_model())
    )
    progress: list[str] = []

    def seen(event: AgentEvent) -> None:
        if event.kind == "progress" and event.record.progress is not None:
            progress.append(event.record.progress.message)

    orchestrator.subscribe(seen)
    started = time.monotonic()
    record = await orchestrator.run("developer", "say hello")
    took = time.monotonic() - started
    await orchestrator.shutdown()

    assert progress == [
        "model API unreachable (no connection), retrying 1/2",
        "model API unreachable (no connection), retrying 2/2",
    ]
    assert record.status == "failed"
    assert record.error is not None
    assert "gave up on the model API (model API unreachable (no connection), retrying 2/2" in (
        record.error
    )
    assert "modelApiRetries" in record.error and "ANTHROPIC_BASE_URL" in record.error
    assert took < 60  # not the minutes of the CLI's own default


@pytest.mark.slow
def test_harness_run_prints_each_retry_on_stderr(project_dir: Path) -> None:
    config = project_dir / "config.yaml"
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace("modelApiRetries: 10", "modelApiRetries: 1"), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--role", "developer", "say hello",
         "--config", str(config)],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, **unreachable_model()},
    )  # fmt: skip

    assert done.returncode == 1
    assert "model API unreachable (no connection), retrying 1/1" in done.stderr
    assert "gave up on the model API" in done.stdout + done.stderr
