"""Spare agents: a CLI started ahead in its sandbox and folder serves the first agent of a new
task at once, exactly as a cold start would have run it; a spare that no longer fits is not
used; spares end with their host. The real Claude Code CLI against the scripted model."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness.cli.offline import scripted_env
from harness.config.roles import Role
from harness.config.settings import WorkspaceSettings
from harness.runtime.claude import ClaudeRuntime
from harness.runtime.host import AgentHost
from harness.runtime.spare_agent import fits
from harness.runtime.spec import (
    AgentControl,
    AgentSpec,
    RunOutcome,
)
from harness.testing.nats_server import NatsServer
from harness.testing.processes import claude_children
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn
from harness.testing.workers import worker_in_process
from harness.workspaces.manager import Workspaces
from tests.support import allowing_io

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

WAIT = 60.0


def script(request: ModelRequest) -> Turn:
    cwd = re.search(r"Primary working directory: (\S+)", request.system_text)
    assert cwd, "the CLI names its working folder"
    if not request.all_tool_results:
        return Turn.call("Write", file_path=f"{cwd.group(1)}/out.txt", content="made\n")
    return Turn.finish(f"did: {request.first_user_text.strip().splitlines()[-1]}")


def developer(prompt: str = "You write code.") -> Role:
    role = Role("developer", "Developer", "worker", prompt, "roles/developer.md")
    return dataclasses.replace(role, tools=("Read", "Write", "Bash"))


def template(role: Role | None = None) -> AgentSpec:
    return AgentSpec(agent_id="spare", role=role or developer(), prompt="", cwd="")


def spec_for(slug: str, prompt: str, role: Role | None = None) -> AgentSpec:
    return dataclasses.replace(template(role), agent_id=f"a{slug}", prompt=prompt, task_slug=slug)


@dataclasses.dataclass
class Rig:
    host: AgentHost
    model: ScriptedModel
    root: Path

    async def run(self, spec: AgentSpec) -> RunOutcome:
        io = allowing_io()
        return await asyncio.wait_for(self.host.run(spec, AgentControl(), io), WAIT)

    def first_request(self, slug: str) -> ModelRequest:
        return next(
            r for r in self.model.main_requests
            if not r.is_side_request and f"task {slug}" in r.first_user_text
        )  # fmt: skip


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    async with ScriptedModel(script) as model:
        runtime = ClaudeRuntime(base_env=scripted_env(model.env()))
        root = tmp_path / "workspaces"
        host = AgentHost(runtime, Workspaces(WorkspaceSettings(root=root)))
        try:
            yield Rig(host, model, root)
        finally:
            await host.close()


def normalised(request: ModelRequest) -> tuple[str, str, list[str]]:
    """What the model saw, but for the folder's own name and the ids of the run."""

    def plain(text: str) -> str:
        text = re.sub(r"([/-])\.?views[/-][0-9a-f]{12}", r"\1views/<folder>", text)
        text = re.sub(r"cc_version=[0-9.]+[0-9a-f]{3};", "cc_version=<v>;", text)  # of the prompt
        return re.sub(r"t-(cold|warm)", "t-<slug>", text)

    return plain(request.system_text), plain(request.first_user_text), sorted(request.tool_names)


async def test_a_spare_serves_a_new_task_as_a_cold_start_would_have(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    cold = await rig.run(spec_for("t-cold", "task t-cold: write it"))
    assert rig.host.spares is not None and rig.host.spares.served == 0
    rig.host.keep_warm([(template(), 1)])
    await rig.host.spares.wait_ready(1, WAIT)

    warm = await rig.run(spec_for("t-warm", "task t-cold: write it".replace("cold", "warm")))

    assert rig.host.spares.served == 1
    assert (cold.status, warm.status) == ("completed", "completed"), (cold.error, warm.error)
    assert warm.result is not None and warm.result.summary == "did: task t-warm: write it"
    # The same prompt, system prompt, tools and folder shape; the work in the task's folder.
    first_cold, first_warm = rig.first_request("t-cold"), rig.first_request("t-warm")
    assert normalised(first_cold) == normalised(first_warm)
    for slug in ("t-cold", "t-warm"):
        assert (rig.root / slug / "out.txt").read_text(encoding="utf-8") == "made\n"
    assert [p.name for p in (rig.root / ".views").iterdir() if p.is_symlink()] == []
    await rig.host.spares.wait_ready(1, WAIT)  # replaced in the background
    # Each sandbox ended as sandboxes do (its inner bubblewrap dying with the outer one): no
    # run taken for one that left processes behind.
    assert not [r for r in caplog.records if "left behind" in r.getMessage()]


async def test_a_spare_made_for_an_older_role_is_not_used_and_is_replaced(rig: Rig) -> None:
    old, new = developer("You write code."), developer("You write careful code.")
    assert not fits(template(old), spec_for("x", "p", new))
    rig.host.keep_warm([(template(old), 1)])
    assert rig.host.spares is not None
    await rig.host.spares.wait_ready(1, WAIT)
    before = claude_children()

    done = await rig.run(spec_for("t-new", "task t-new: write it", new))  # cold

    assert done.status == "completed" and rig.host.spares.served == 0
    assert "careful" in rig.first_request("t-new").system_text
    rig.host.keep_warm([(template(new), 1)])  # the role file changed: spares follow
    await rig.host.spares.settled(WAIT)
    await rig.host.spares.wait_ready(1, WAIT)
    assert not before & claude_children()  # the old spare's CLI ended


async def test_a_burst_larger_than_the_spares_starts_the_rest_cold(rig: Rig) -> None:
    rig.host.keep_warm([(template(), 1)])
    assert rig.host.spares is not None
    await rig.host.spares.wait_ready(1, WAIT)

    outcomes = await asyncio.gather(
        *(rig.run(spec_for(f"t-{n}", f"task t-{n}: write it")) for n in range(4))
    )

    assert [o.status for o in outcomes] == ["completed"] * 4
    assert rig.host.spares.served == 1


async def test_a_dispatch_while_the_spare_still_starts_is_served_by_it(rig: Rig) -> None:
    rig.host.keep_warm([(template(), 1)])
    assert rig.host.spares is not None and rig.host.spares.ready == 0  # still starting

    done = await rig.run(spec_for("t-early", "task t-early: write it"))

    assert done.status == "completed", done.error
    assert rig.host.spares.served == 1
    assert (rig.root / "t-early" / "out.txt").read_text(encoding="utf-8") == "made\n"


async def test_an_agent_started_ahead_serves_the_next_dispatch_and_is_not_replaced(
    rig: Rig,
) -> None:
    assert rig.host.spares is not None
    rig.host.spares.refill_delay = 0  # a replacement, were there one, would start at once
    rig.host.start_ahead(template())

    done = await rig.run(spec_for("t-once", "task t-once: write it"))
    await rig.host.spares.settled(WAIT)

    assert done.status == "completed", done.error
    assert (rig.host.spares.served, rig.host.spares.ready) == (1, 0)


async def test_closing_the_host_ends_its_spares(rig: Rig) -> None:
    before = claude_children()
    rig.host.keep_warm([(template(), 2)])
    assert rig.host.spares is not None
    await rig.host.spares.wait_ready(2, WAIT)
    spares = claude_children() - before
    assert len(spares) == 2

    await rig.host.close()

    assert not spares & claude_children()
    assert [p for p in (rig.root / ".views").iterdir()] == []


async def test_a_worker_keeps_the_spares_its_orchestrator_asks_for_and_serves_with_them(
    tmp_path: Path,
) -> None:
    async with NatsServer(tmp_path / "nats") as server, ScriptedModel(script) as model:
        runtime = ClaudeRuntime(base_env=scripted_env(model.env()))
        async with worker_in_process(server.url, runtime, tmp_path / "worker") as (
            worker,
            hosting,
        ):
            hosting.keep_warm([(template(), 1)])
            assert worker.host.spares is not None
            await worker.host.spares.wait_ready(1, WAIT)
            spare = claude_children()

            io = allowing_io()
            spec = spec_for("t-far", "task t-far: write it")
            done = await asyncio.wait_for(hosting.run(spec, AgentControl(), io), WAIT)

            assert done.status == "completed", done.error
            assert worker.host.spares.served == 1
            assert (tmp_path / "worker" / "t-far" / "out.txt").exists()
    assert not spare & claude_children()  # the worker's spares ended with it


async def test_a_spare_whose_folder_was_pruned_meanwhile_gives_way_to_a_cold_start(
    rig: Rig,
) -> None:
    rig.host.keep_warm([(template(), 1)])
    assert rig.host.spares is not None
    await rig.host.spares.wait_ready(1, WAIT)
    [folder] = [p for p in (rig.root / ".views").iterdir() if p.is_dir()]
    shutil.rmtree(folder)  # `workspaces prune` while it waited a long time

    done = await rig.run(spec_for("t-late", "task t-late: write it"))

    assert done.status == "completed", done.error
    assert rig.host.spares.served == 0
    assert (rig.root / "t-late" / "out.txt").read_text(encoding="utf-8") == "made\n"


async def test_a_follow_up_starts_on_the_spare_its_tasks_last_agent_left(rig: Rig) -> None:
    rig.host.keep_warm([], follow_ups=1)
    assert rig.host.follow_ups is not None
    first = await rig.run(spec_for("t-thread", "task t-thread: write it"))
    await rig.host.follow_ups.wait_for("t-thread", WAIT)

    again = await rig.run(spec_for("t-thread", "task t-thread: and more"))

    assert (first.status, again.status) == ("completed", "completed"), again.error
    assert rig.host.follow_ups.served == 1
    later = next(r for r in rig.model.main_requests if "and more" in r.first_user_text)
    cwd = re.search(r"Primary working directory: (\S+)", later.system_text)
    assert cwd is not None and "/.views/" in cwd.group(1)  # shown as a cold start is
    assert (rig.root / "t-thread" / "out.txt").read_text(encoding="utf-8") == "made\n"
