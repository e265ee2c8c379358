"""Agents on other machines: the orchestrator sends them over a real nats-server with
JetStream to ``harness worker`` processes, which run the real Claude Code CLI against the
scripted model. Everything an agent does locally works the same remotely. Only the tests
about which worker an agent goes to (spread, on the other, not run again) start a second
worker: each is about 1.5 CPU-seconds to start."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.agents.dispatching import AgentHandle
from harness.agents.orchestrator import Orchestrator
from harness.project import Project, build_orchestrator, load_project
from harness.runtime.nats_hosting import NatsHosting
from harness.runtime.nats_link import NatsSettings
from harness.testing.nats_server import NatsServer
from harness.testing.processes import claude_children
from harness.testing.scripted_model import ModelRequest, Script, ScriptedModel, Turn, demo_script
from harness.testing.workers import start_workers, stop_workers, worker_env
from tests.support import AnsweringHumans, git, latest_task, make_repository

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.nats]

WAIT = 60.0
ASK = "mcp__harness__ask_human"
ONE = ("worker-a",)
BOTH = ("worker-a", "worker-b")


@dataclass
class Cluster:
    server: NatsServer
    model: ScriptedModel
    orchestrator: Orchestrator
    workers: dict[str, asyncio.subprocess.Process]


ClusterFactory = Callable[..., contextlib.AbstractAsyncContextManager[Cluster]]


@pytest.fixture
def cluster(project: Project, tmp_path: Path) -> ClusterFactory:
    """``async with cluster(script, slots=2) as c:`` NATS, the scripted model, worker
    ``worker-a`` (and ``worker-b`` with ``workers=BOTH``), and an orchestrator sending its
    agents to them."""

    @contextlib.asynccontextmanager
    async def start(
        script: Script,
        *,
        slots: int = 2,
        config: Project | None = None,
        workers: tuple[str, ...] = ONE,
    ) -> AsyncIterator[Cluster]:
        async with (
            NatsServer(tmp_path / "nats") as server,
            ScriptedModel(script) as model,
        ):
            env = worker_env(model.env())
            started = await start_workers(workers, server.url, env, tmp_path, slots=slots)
            runtime = NatsHosting(NatsSettings(server.url), lost_after=3.0)
            orchestrator = build_orchestrator(config or project, runtime)
            try:
                yield Cluster(server, model, orchestrator, started)
            finally:
                await orchestrator.shutdown()
                await runtime.close()
                await stop_workers(started.values())

    return start


async def until(predicate: Callable[[], bool], timeout: float = WAIT) -> None:
    """Polls ``predicate`` (a condition this test cannot be told of) with a bound."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


def held_until(count: int) -> Callable[[ModelRequest], Awaitable[Turn]]:
    """A script whose agents all wait until ``count`` of them have asked, then finish."""
    sessions: set[str] = set()
    everyone = asyncio.Event()

    async def script(request: ModelRequest) -> Turn:
        sessions.add(request.headers.get("X-Claude-Code-Session-Id", str(request.index)))
        if len(sessions) >= count:
            everyone.set()
        await everyone.wait()
        return Turn.finish(f"done: {request.first_user_text.strip().splitlines()[-1]}")

    return script


async def test_ten_agents_spread_over_both_workers_and_report_back(
    cluster: ClusterFactory, project: Project
) -> None:
    config = dataclasses.replace(
        project.config, mcp=dataclasses.replace(project.config.mcp, max_concurrent_agents=10)
    )
    async with cluster(
        held_until(10), slots=5, config=Project(config, project.roles), workers=BOTH
    ) as c:
        orchestrator = c.orchestrator
        handles = [await orchestrator.draft("developer", f"job {n}") for n in range(10)]
        await until(lambda: sum(1 for a in orchestrator.agents() if a.worker) == 10)
        where = [str(a.worker) for a in orchestrator.agents()]
        records = [await orchestrator.wait(h.agent_id, WAIT) for h in handles]

    # All ten at work at once (the script holds each until the tenth asks): five per worker.
    assert sorted(where) == ["worker-a"] * 5 + ["worker-b"] * 5
    assert [r.status for r in records] == ["completed"] * 10
    assert [r.result.summary if r.result else None for r in records] == [
        f"done: job {n}" for n in range(10)
    ]
    journal = await orchestrator.tasks.task(handles[0].task_slug)
    assert journal.dispatches[0].journal_file  # the journal streamed back


async def test_an_analyst_on_one_worker_drafts_and_awaits_a_developer_on_the_other(
    cluster: ClusterFactory,
) -> None:
    async with cluster(demo_script, slots=1, workers=BOTH) as c:
        record = await asyncio.wait_for(
            c.orchestrator.run("product-analyst", "plan: a settings page"), WAIT
        )
        task = await latest_task(c.orchestrator)
        audit = await c.orchestrator.tasks.audit_log(task.slug)

    assert record.status == "completed", record.error
    analyst, developer = sorted(task.dispatches, key=lambda d: d.parent_id is not None)
    assert developer.parent_id == analyst.agent_id and developer.status == "completed"
    assert developer.result is not None and record.result is not None
    assert developer.result.summary in record.result.summary
    assert [(e["tool"], e["outcome"]) for e in audit] == [
        ("draft_agent", "ok"),
        ("await_agent", "ok"),
    ]


async def test_a_remote_agent_asks_a_human_and_hears_the_answer(cluster: ClusterFactory) -> None:
    def script(request: ModelRequest) -> Turn:
        if not request.all_tool_results:
            return Turn.call(ASK, question="Which colour?", options=["red", "blue"])
        return Turn.finish(f"painted it {request.all_tool_results[-1].text}")

    async with cluster(script) as c:
        humans = AnsweringHumans(c.orchestrator.humans.answer_question, reply="blue")
        c.orchestrator.humans.add_human_channel(humans)
        record = await asyncio.wait_for(c.orchestrator.run("developer", "paint it"), WAIT)

    assert [q.text for q in humans.asked] == ["Which colour?"]
    assert record.result is not None and "blue" in record.result.summary


async def slow_agent_on_a_worker(c: Cluster) -> tuple[AgentHandle, str]:
    """A developer whose model turn stalls, once a worker has started it; and the worker."""
    handle = await c.orchestrator.draft("developer", "a very slow job")
    await until(lambda: bool((info := c.orchestrator.agent(handle.agent_id)) and info.worker))
    info = c.orchestrator.agent(handle.agent_id)
    assert info is not None and info.worker is not None
    return handle, info.worker


async def test_killing_a_remote_agent_stops_its_cli_on_the_worker(cluster: ClusterFactory) -> None:
    async with cluster(lambda request: Turn(stall_seconds=120)) as c:
        handle, worker_name = await slow_agent_on_a_worker(c)
        worker = c.workers[worker_name]
        await until(lambda: bool(claude_children(worker.pid)))
        assert await c.orchestrator.kill(handle.agent_id, "stopped by a test")
        record = await c.orchestrator.wait(handle.agent_id, WAIT)
        await until(lambda: not claude_children(worker.pid), timeout=5)

    assert record.status == "killed"


async def test_a_worker_killed_mid_agent_ends_it_interrupted_and_not_run_again(
    cluster: ClusterFactory,
) -> None:
    # Two workers: the one left is where the agent would run again.
    async with cluster(lambda request: Turn(stall_seconds=120), workers=BOTH) as c:
        handle, worker_name = await slow_agent_on_a_worker(c)
        await c.model.wait_for_request(timeout=WAIT)  # the agent is at work
        c.workers[worker_name].kill()
        record = await c.orchestrator.wait(handle.agent_id, WAIT)
        runs = len({r.headers.get("X-Claude-Code-Session-Id") for r in c.model.main_requests})

    assert record.status == "interrupted"
    assert record.error is not None and f"{worker_name} was lost" in record.error
    assert runs == 1


async def test_answers_from_the_orchestrator_reach_the_agent_through_approvals_too(
    cluster: ClusterFactory,
) -> None:
    def script(request: ModelRequest) -> Turn:
        if not request.all_tool_results:
            return Turn.call("Bash", command="git push -h")
        return Turn.finish(f"ran: {request.all_tool_results[-1].text.strip()}")

    async with cluster(script) as c:
        humans = AnsweringHumans(c.orchestrator.humans.answer_question, reply="Allow once")
        c.orchestrator.humans.add_human_channel(humans)
        record = await asyncio.wait_for(
            c.orchestrator.run("developer", "echo it", requested_by="U42"), WAIT
        )

    assert [q.kind for q in humans.asked] == ["approval"]
    assert record.result is not None and "usage: git push" in record.result.summary


async def test_an_agent_finishes_when_nats_restarts_mid_run(cluster: ClusterFactory) -> None:
    release = asyncio.Event()

    async def script(request: ModelRequest) -> Turn:
        await release.wait()
        return Turn.finish("done after the outage")

    async with cluster(script) as c:
        handle = await c.orchestrator.draft("developer", "outlast it")
        await c.model.wait_for_request(timeout=WAIT)
        await c.server.restart()
        release.set()
        record = await c.orchestrator.wait(handle.agent_id, WAIT)

    assert record.status == "completed", record.error
    assert record.result is not None and record.result.summary == "done after the outage"


async def test_a_remote_developer_works_on_the_tasks_branch_in_a_clone_on_its_worker(
    cluster: ClusterFactory, project_dir: Path, tmp_path: Path
) -> None:
    origin = make_repository(tmp_path / "origin", {"README.md": "web\n"})
    config = project_dir / "config.yaml"
    config.write_text(
        config.read_text(encoding="utf-8")
        + f"\nworkspaces:\n  default: web\n  repositories:\n    web: {{url: 'file://{origin}'}}\n",
        encoding="utf-8",
    )

    def script(request: ModelRequest) -> Turn:
        cwd = re.search(r"Primary working directory: (\S+)", request.system_text)
        assert cwd
        if not request.all_tool_results:
            return Turn.call("Write", file_path=f"{cwd.group(1)}/page.txt", content="blue\n")
        return Turn.finish("wrote the page")

    async with cluster(script, config=load_project(config)) as c:
        handle = await c.orchestrator.draft("developer", "write the page", repository="web")
        record = await c.orchestrator.wait(handle.agent_id, WAIT)
        task = await latest_task(c.orchestrator)
        diff = await c.orchestrator.tasks.diff(task.slug, record)

    assert record.status == "completed", record.error
    assert record.branch == f"harness/{task.slug}"
    # The record says where the worker placed it (its write there needed nobody's approval).
    assert Path(record.cwd) in {tmp_path / worker / task.slug for worker in c.workers}
    assert record.diff_stat is not None and "page.txt" in record.diff_stat
    assert diff is not None and "+blue" in diff
    # The work is committed on the branch, in the worker's clone (not in the origin).
    clones = list(tmp_path.glob("worker-*/.repos/web"))
    assert len(clones) == 1
    assert git(clones[0], "show", f"{record.branch}:page.txt") == "blue"
    assert not (origin / "page.txt").exists()


async def test_a_worker_never_receives_the_bots_slack_secrets(
    cluster: ClusterFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-the-bots-secret")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "the-signing-secret")

    def script(request: ModelRequest) -> Turn:
        if not request.all_tool_results:
            return Turn.call("Bash", command="env")
        return Turn.finish("listed", issues=[request.all_tool_results[-1].text])

    async with cluster(script) as c:
        humans = AnsweringHumans(c.orchestrator.humans.answer_question, reply="Allow once")
        c.orchestrator.humans.add_human_channel(humans)
        listener = await NatsHosting(NatsSettings(c.server.url)).link()
        runs = await listener.nc.subscribe(listener.subjects.all_runs)
        handle = await c.orchestrator.draft("developer", "show the environment", requested_by="U42")
        sent = (await runs.next_msg(timeout=WAIT)).data  # what a worker receives
        record = await c.orchestrator.wait(handle.agent_id, WAIT)
        await listener.close()

    assert record.result is not None and "PATH=" in record.result.issues[0]
    assert b"show the environment" in sent
    for secret in ("xoxb-the-bots-secret", "the-signing-secret"):
        assert secret not in record.result.issues[0]
        assert secret.encode() not in sent
