"""Where config.yaml's ``runtime:`` runs the agents: what each backend is called, what it
needs of this machine, and the hosting it makes (the one reader of ``runtime.kind``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config import RuntimeSettings, WorkspaceSettings
from harness.errors import HarnessError
from harness.runtime.backends import runtime_backend
from harness.runtime.host import AgentHost
from harness.runtime.spec import Hosting
from harness.testing.held_runtime import HeldRuntime
from harness.testing.nats_server import free_port
from harness.workspaces.manager import Workspaces

pytestmark = pytest.mark.anyio


def workspaces(tmp_path: Path) -> Workspaces:
    return Workspaces(WorkspaceSettings(root=tmp_path / "workspaces"))


async def test_local_runs_the_agents_on_a_host_here(tmp_path: Path) -> None:
    backend = runtime_backend(RuntimeSettings())

    assert (backend.name, backend.where, backend.agents_here) == ("local", "local", True)
    backend.require()  # nothing to install
    hosting = backend.hosting(workspaces(tmp_path), HeldRuntime())
    assert isinstance(hosting, AgentHost) and isinstance(hosting, Hosting)
    await hosting.connect()  # nothing to reach
    assert hosting.problem() is None
    assert not hosting.agents_outlive_harness


async def test_nats_runs_them_on_workers_and_says_until_connected(tmp_path: Path) -> None:
    url = "nats://10.0.0.5:4222"
    settings = RuntimeSettings(kind="nats", url=url, prefix="team", lost_after_seconds=3.0)
    backend = runtime_backend(settings)

    assert (backend.name, backend.where, backend.agents_here) == ("NATS", f"NATS at {url}", False)
    hosting = backend.hosting(workspaces(tmp_path))
    assert isinstance(hosting, Hosting) and hosting.agents_outlive_harness
    assert hosting.problem() == f"NATS at {url} not connected"
    await hosting.close()
    await hosting.close()  # safe twice


@pytest.mark.waits
async def test_probing_nats_where_there_is_none_names_the_url_and_the_fix() -> None:
    pytest.importorskip("nats")
    url = f"nats://127.0.0.1:{free_port()}"
    backend = runtime_backend(RuntimeSettings(kind="nats", url=url))

    with pytest.raises(HarnessError) as caught:
        await backend.probe(timeout=2.0, client="test")
    assert f"cannot connect to NATS at {url}" in caught.value.message
    assert "nats-server -js" in caught.value.fix
