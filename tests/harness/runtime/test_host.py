"""The agent host: one suite run against the host in this process and against a ``harness
worker``'s host reached over a real NATS server. Either places the workspace the spec asks
for, runs the agent there, commits a writer's work on the task's branch and reports it."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from harness.config.roles import Role
from harness.config.settings import RepositorySettings, WorkspaceSettings
from harness.runtime.host import AgentHost, workspace_request
from harness.runtime.nats_hosting import NatsHosting
from harness.runtime.nats_link import NatsSettings
from harness.runtime.spec import (
    AgentControl,
    AgentSpec,
    Approval,
    Hosting,
    RunIO,
    RunOutcome,
    ToolReply,
    ToolUse,
)
from harness.runtime.worker import Worker
from harness.tasks.model import AgentResult
from harness.testing.nats_server import NatsServer
from harness.workspaces.manager import WorkspaceError, WorkspaceRequest, Workspaces
from tests.support import git, make_repository

pytestmark = pytest.mark.anyio

WAIT = 30.0


def test_a_task_in_a_repository_asks_for_its_worktree_and_a_scratch_task_for_nothing() -> None:
    web = RepositorySettings("web", url="file:///srv/web.git", cache=Path("/c"), base_branch="dev")
    settings = WorkspaceSettings(repositories={"web": web}, commit_work=False)

    assert workspace_request(settings, "WEB") == WorkspaceRequest(
        repository="web", url="file:///srv/web.git", path=None, base_branch="dev",
        commit_work=False,
    )  # fmt: skip
    assert workspace_request(settings, None) is None


def test_a_repository_no_longer_configured_is_an_error_not_a_scratch_folder() -> None:
    settings = WorkspaceSettings(repositories={})

    with pytest.raises(WorkspaceError) as caught:
        workspace_request(settings, "web")

    assert caught.value.message == "unknown repository 'web'; known repositories: (none)"


class FileWriter:
    """An agent runtime whose agents write a file named by their prompt's first word into
    their folder (when that is given) and wait for a kill when the prompt says ``hold``."""

    def __init__(self) -> None:
        self.seen: list[AgentSpec] = []
        self.holding = asyncio.Event()

    async def run(self, spec: AgentSpec, control: AgentControl, io: RunIO) -> RunOutcome:
        self.seen.append(spec)
        io.on_message({"type": "Started", "cwd": spec.cwd})
        if spec.prompt == "hold":
            killed = asyncio.Event()

            async def interrupt() -> None:
                killed.set()

            control.attach(interrupt)
            self.holding.set()
            await killed.wait()
            control.attach(None)
            return RunOutcome(status="killed", error=control.kill_reason)
        name, _, text = spec.prompt.partition(" ")
        folder = Path(spec.cwd)
        if name == "tamper":  # points its worktree's .git somewhere of its own
            (folder / ".git").write_text(f"gitdir: {folder}/.mine\n", encoding="utf-8")
        existing = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
        (folder / name).write_text(text + "\n", encoding="utf-8")
        summary = f"found {', '.join(existing) or 'nothing'}"
        return RunOutcome(status="completed", result=AgentResult(summary), cost_usd=0.01, turns=1)


class NoTools:
    async def call(self, agent_id: str, tool: str, args: Mapping[str, Any]) -> ToolReply:
        return ToolReply({"error": "none"}, is_error=True)

    async def approve(self, agent_id: str, tool: str, args: Mapping[str, Any]) -> Approval:
        return Approval(False, "no")


@dataclasses.dataclass
class HostRig:
    hosting: Hosting
    runtime: FileWriter
    repository: Path
    folder: Path  # where the host makes the tasks' workspaces

    placed: list[str] = dataclasses.field(default_factory=list)  # the folders it reported

    async def run(
        self, spec: AgentSpec, control: AgentControl | None = None
    ) -> tuple[RunOutcome, list[dict[str, Any]]]:
        messages: list[dict[str, Any]] = []

        async def ignore(_use: ToolUse) -> None:
            return None

        io = RunIO(NoTools(), messages.append, ignore, self.placed.append)
        outcome = await asyncio.wait_for(
            self.hosting.run(spec, control or AgentControl(), io), WAIT
        )
        return outcome, messages


# Each host rig makes a real repository and the task's worktree in it.
@pytest.fixture(
    params=[
        pytest.param("in-process", marks=pytest.mark.git),
        pytest.param("worker over NATS", marks=[pytest.mark.git, pytest.mark.nats]),
    ]
)
async def host(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[HostRig]:
    repository = make_repository(tmp_path / "web")
    runtime = FileWriter()
    if request.param == "in-process":
        folder = tmp_path / "workspaces"
        yield HostRig(AgentHost(runtime, Workspaces(WorkspaceSettings(root=folder))), runtime,
                      repository, folder)  # fmt: skip
        return
    folder = tmp_path / "worker-workspaces"
    async with NatsServer(tmp_path / "nats") as server:
        settings = NatsSettings(server.url)
        worker = Worker(settings, runtime, name="w1", slots=2, workspaces=folder)
        stop, ready = asyncio.Event(), asyncio.Event()
        serving = asyncio.create_task(worker.serve(stop, ready.set))
        await asyncio.wait_for(ready.wait(), WAIT)
        hosting = NatsHosting(settings, lost_after=5.0)
        try:
            yield HostRig(hosting, runtime, repository, folder)
        finally:
            await hosting.close()
            stop.set()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(serving, WAIT)


def developer(**changes: Any) -> Role:
    role = Role("developer", "Developer", "worker", "You write code.", "roles/developer.md")
    return dataclasses.replace(role, **changes)


def spec_for(rig: HostRig, prompt: str, *, slug: str = "t-1", role: Role | None = None,
             scratch: bool = False) -> AgentSpec:  # fmt: skip
    request = WorkspaceRequest("web", None, str(rig.repository), "main")
    return AgentSpec(
        agent_id=f"a{abs(hash((slug, prompt))) % 10**10:010d}",
        role=role or developer(),
        prompt=prompt,
        cwd="/nowhere",  # the host decides where the agent works
        task_slug=slug,
        workspace=None if scratch else request,
    )


async def test_a_writers_work_is_committed_on_the_tasks_branch_and_reported(
    host: HostRig,
) -> None:
    outcome, messages = await host.run(spec_for(host, "notes.md the plan"))

    assert outcome.status == "completed", outcome.error
    worktree = host.folder / "t-1"
    assert messages == [{"type": "Started", "cwd": str(worktree)}]
    assert host.placed == [str(worktree)]  # said to the harness, from a worker too
    assert outcome.work is not None
    assert outcome.work.branch == "harness/t-1"
    assert "notes.md" in outcome.work.diff_stat and "+the plan" in outcome.work.diff
    assert outcome.work.head_commit == git(worktree, "rev-parse", "HEAD")
    assert git(worktree, "status", "--porcelain") == ""  # committed, nothing left over
    assert git(host.repository, "branch", "--list", "harness/t-1")  # in the repository itself


async def test_a_follow_up_works_in_the_same_worktree_on_the_earlier_work(host: HostRig) -> None:
    await host.run(spec_for(host, "first.md one"))
    outcome, _ = await host.run(spec_for(host, "second.md two"))

    assert outcome.result is not None and outcome.result.summary == "found README.md, first.md"
    assert outcome.work is not None and "first.md" in outcome.work.diff_stat
    assert "second.md" in outcome.work.diff_stat


async def test_a_reader_leaves_its_edits_uncommitted_and_reported(host: HostRig) -> None:
    reader = developer(name="reviewer", tools=("Read", "Grep"))
    outcome, _ = await host.run(spec_for(host, "scratch.txt left here", role=reader))

    assert outcome.work is not None and "+left here" in outcome.work.diff
    assert git(host.folder / "t-1", "status", "--porcelain") == "?? scratch.txt"


async def test_a_scratch_task_works_in_its_own_folder_that_git_cannot_see_past(
    host: HostRig,
) -> None:
    outcome, _ = await host.run(spec_for(host, "out.txt done", scratch=True))

    folder = host.folder / "t-1"
    assert outcome.status == "completed" and outcome.work is None
    assert (folder / "out.txt").read_text(encoding="utf-8") == "done\n"
    [seen] = host.runtime.seen
    assert seen.cwd == str(folder)
    assert seen.env["GIT_CEILING_DIRECTORIES"] == str(host.folder)


async def test_a_role_with_a_folder_of_its_own_works_there_and_no_workspace_is_made(
    host: HostRig, tmp_path: Path
) -> None:
    own = tmp_path / "docs"
    own.mkdir()
    outcome, _ = await host.run(spec_for(host, "index.md hi", role=developer(cwd=own)))

    assert outcome.status == "completed" and outcome.work is None
    assert (own / "index.md").exists()
    assert not (host.folder / "t-1").exists()


async def test_a_workspace_that_cannot_be_made_fails_the_run_saying_why(host: HostRig) -> None:
    await host.run(spec_for(host, "a.txt scratch first", scratch=True))
    outcome, _ = await host.run(spec_for(host, "b.txt then the repository"))

    assert outcome.status == "failed"
    assert outcome.error is not None
    assert outcome.error.startswith("could not make its workspace: task 't-1' already has")
    assert len(host.runtime.seen) == 1  # the agent never ran


async def test_a_kill_stops_the_agent_on_its_host(host: HostRig) -> None:
    control = AgentControl()
    running = asyncio.create_task(host.run(spec_for(host, "hold"), control))
    await asyncio.wait_for(host.runtime.holding.wait(), WAIT)
    await control.kill("enough")
    outcome, _ = await running

    assert (outcome.status, outcome.error) == ("killed", "enough")


async def test_a_worktree_whose_git_link_its_agent_changed_is_not_trusted_and_said_so(
    host: HostRig,
) -> None:
    outcome, _ = await host.run(spec_for(host, "tamper notes.md planted"))

    assert outcome.status == "failed" and outcome.work is None
    assert outcome.error is not None
    assert outcome.error.startswith("the .git of task t-1's worktree was changed (it names ")
    assert "its work was neither read nor committed" in outcome.error
    # Nothing committed on the task's branch: it holds the repository's first commit only.
    assert git(host.repository, "log", "--format=%s", "harness/t-1") == "start"
