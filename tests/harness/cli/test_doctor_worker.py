"""``harness doctor`` on a worker's machine ($HARNESS_NATS_URL set, no config.yaml): it checks
what ``harness worker`` needs (model access, git, the sandbox, the NATS server, disk space),
not a config.yaml the worker never reads."""

from __future__ import annotations

import argparse
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness.cli import doctor
from harness.cli.doctor_check import exit_code
from harness.testing.nats_server import NatsServer
from harness.testing.scripted_model import ScriptedModel, demo_script


@pytest.fixture
def sandbox_works(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sandbox probe passes whatever this machine is (its own tests cover it)."""

    async def fine() -> None:
        return None

    monkeypatch.setattr("harness.sandbox.runner.check_sandbox", fine)


@pytest.fixture
async def model() -> AsyncIterator[ScriptedModel]:
    async with ScriptedModel(demo_script) as scripted:
        yield scripted


@pytest.mark.anyio
@pytest.mark.nats
@pytest.mark.usefixtures("sandbox_works")
async def test_a_ready_worker_machine_passes_without_a_config_yaml(
    tmp_path: Path, model: ScriptedModel
) -> None:
    environ = {"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": model.base_url}
    async with NatsServer(tmp_path / "nats") as nats:
        checks = await doctor.run_worker_checks(nats.url, environ, tmp_path)

    assert [(c.name, c.status) for c in checks] == [
        ("config", "skip"),
        ("model access", "ok"),
        ("git", "ok"),
        ("sandbox", "ok"),
        ("NATS", "ok"),
        ("disk space", "ok"),
    ]
    assert exit_code(checks) == 0


@pytest.mark.waits
def test_doctor_in_a_worker_folder_checks_the_nats_server_not_a_config_yaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"nats://127.0.0.1:{sock.getsockname()[1]}"  # nobody listens there once closed
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HARNESS_NATS_URL", url)
    monkeypatch.delenv("HARNESS_CONFIG", raising=False)

    code = doctor.main(argparse.Namespace(config=None, slack=False))

    out = capsys.readouterr().out
    assert code == 1
    assert "- config: not needed on a worker" in out
    assert "✗ config" not in out
    assert f"✗ NATS: cannot connect to NATS at {url}" in out
    assert "disk space: " in out and str(tmp_path / ".agents/worker-workspaces") in out
