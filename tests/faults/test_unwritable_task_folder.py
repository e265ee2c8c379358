"""A task folder that cannot be written when its agent ends: the final record is kept (spooled
outside the folder) and stored once the folder takes writes again, without a restart; the
thread gets the result once, and never a false "interrupted"; a restart while the record is
still pending applies it rather than marking the dispatch interrupted.

The real orchestrator and file store, the real Bolt app over the Slack emulator; agents held
by a scripted runtime. The folder is made unwritable for real (see ``frozen``)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.app import create_app
from bot.server import BotServer
from bot.settings import BotOptions, SlackEnv
from bot.testing.slack_emulator import SlackEmulator
from harness.agents.orchestrator import Orchestrator
from harness.errors import HarnessError, LimitError
from harness.project import Project, build_orchestrator, load_project
from harness.tasks.common import PENDING_FOLDER, TASK_FILE
from harness.tasks.model import DispatchRecord
from harness.testing.held_runtime import HeldRuntime
from tests.bot.conftest import BOT_TOKEN, SECRET, WAIT, Rig, RigFactory, message_text
from tests.support import add_repositories, make_repository

pytestmark = pytest.mark.anyio

FAST = BotOptions(
    status_interval=0.2, delivery_retry_limit=0.1, drain_timeout=1.0, stream_replies=False
)


@contextlib.contextmanager
def frozen(folder: Path) -> Iterator[None]:
    """``folder`` refuses every new file, rename and removal while in the block.

    The tests run as root here, and root ignores permission bits (``chmod 0o500`` changes
    nothing for it), but not the immutable attribute: with ``chattr +i`` on the folder no one
    may create, rename or remove a file in it, so the store's atomic write of task.json (a
    temp file beside it, renamed over it) fails for real, at the filesystem, deterministically.
    As another user (no CAP_LINUX_IMMUTABLE) the permission bits do the same."""
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i", str(folder)], check=True)
        undo = ["chattr", "-i", str(folder)]
    else:
        folder.chmod(0o500)
        undo = []
    try:
        with pytest.raises(PermissionError):  # the condition really holds
            tempfile.mkstemp(dir=folder)
        yield
    finally:
        if undo:
            subprocess.run(undo, check=True)
        else:
            folder.chmod(0o755)


class Freezer:
    """Freezes a folder now and thaws it later (or at the test's end, whatever happens)."""

    def __init__(self) -> None:
        self._held: dict[Path, contextlib.ExitStack] = {}

    def freeze(self, folder: Path) -> None:
        stack = contextlib.ExitStack()
        stack.enter_context(frozen(folder))
        self._held[folder] = stack

    def thaw(self, folder: Path) -> None:
        self._held.pop(folder).close()

    def thaw_all(self) -> None:
        for folder in list(self._held):
            self.thaw(folder)


@pytest.fixture
def freezer() -> Iterator[Freezer]:
    found = Freezer()
    try:
        yield found
    finally:
        found.thaw_all()  # pytest must be able to remove the temp folders


def stored(tasks_dir: Path, slug: str) -> dict[str, Any]:
    """The task's dispatch as task.json on disk holds it (the only dispatch)."""
    data = json.loads((tasks_dir / slug / TASK_FILE).read_text("utf-8"))
    [dispatch] = data["dispatches"]
    return dict(dispatch)


async def stored_final(tasks_dir: Path, slug: str) -> dict[str, Any]:
    """Waits (bounded) until task.json holds the dispatch's final record and the record is
    settled (its spooled copy, removed just after the store, is gone); returns it."""

    async def final() -> dict[str, Any]:
        while True:
            dispatch = await asyncio.to_thread(stored, tasks_dir, slug)
            if dispatch["status"] != "running" and not spooled(tasks_dir):
                return dispatch
            await asyncio.sleep(0.05)

    return await asyncio.wait_for(final(), WAIT)


def spooled(tasks_dir: Path) -> list[str]:
    folder = tasks_dir / PENDING_FOLDER
    return sorted(p.name for p in folder.glob("*.json")) if folder.is_dir() else []


async def result_posted(r: Rig, channel: str, thread_ts: str, summary: str) -> None:
    def found() -> bool | None:
        return any(summary in message_text(m) for m in r.bot_messages(channel, thread_ts)) or None

    await r.slack.wait_for(found, WAIT)


async def frozen_at_work(
    r: Rig, freezer: Freezer, tasks_dir: Path, *, footer: bool = False
) -> tuple[str, str, str]:
    """A request whose agent is at work (its record says running; with ``footer``, it
    changed footer.txt in its folder), its task folder then made unwritable: (thread ts,
    task slug, agent id)."""
    running = asyncio.Event()  # its record says running (written as its agent starts)
    r.orchestrator.subscribe(lambda event: running.set() if event.kind == "started" else None)
    asked = (await r.say("fix the footer", channel="D1")).event["ts"]
    await r.held.wait_started(1)
    await asyncio.wait_for(running.wait(), WAIT)
    spec = r.held.started[0]
    if footer:  # the agent's work, in its worktree
        (Path(spec.cwd) / "footer.txt").write_text("new footer\n", encoding="utf-8")
    freezer.freeze(tasks_dir / spec.task_slug)
    return asked, spec.task_slug, spec.agent_id


async def ended_unwritable(r: Rig, freezer: Freezer, tasks_dir: Path) -> tuple[str, str, str]:
    """A request whose agent ends while its task folder cannot be written: (thread ts, task
    slug, agent id), once the thread has the result and the reaction."""
    asked, slug, agent_id = await frozen_at_work(r, freezer, tasks_dir)
    r.held.release(agent_id)
    # The result reaches the thread once, from the record kept while the store refuses it.
    assert await r.final_reaction("D1", asked) == "white_check_mark"
    await result_posted(r, "D1", asked, "did: fix the footer")
    assert stored(tasks_dir, slug)["status"] == "running"  # task.json could not take it
    return asked, slug, agent_id


async def says_completed(orchestrator: Orchestrator, slug: str, agent_id: str) -> None:
    """What the facade says of the dispatch (``harness tasks``, ``show``, ``await_agent``)."""
    [summary] = [s for s in await orchestrator.tasks.task_summaries() if s.slug == slug]
    assert (summary.status, summary.last_status) == ("completed", "completed")
    record: DispatchRecord = await orchestrator.record(agent_id)
    assert record.status == "completed"
    assert record.result is not None and record.result.summary == "did: fix the footer"
    assert record.cost_usd == 0.01
    [dispatch] = (await orchestrator.tasks.task(slug)).dispatches
    assert dispatch.status == "completed"


@contextlib.asynccontextmanager
async def bot_started_again(
    project: Project, slack: SlackEmulator, runtime: HeldRuntime
) -> AsyncIterator[tuple[Rig, list[tuple[str, DispatchRecord]]]]:
    """The bot started as ``harness bot`` starts it: recovery first, then the bot told what
    recovery marked interrupted (the rig itself skips recovery)."""
    orchestrator = build_orchestrator(project, runtime)
    recovered = await orchestrator.recover_interrupted()
    env = SlackEnv(
        bot_token=BOT_TOKEN, app_token=None, signing_secret=SECRET, api_url=slack.api_url
    )
    bot = create_app(orchestrator, env, options=FAST)
    bot.interrupted = recovered
    server = BotServer(bot, "http", app_token=None, host="127.0.0.1", port=0)
    await server.start()
    try:
        slack.bot_url, slack.delivery = server.url, "http"
        yield Rig(slack, bot, server, runtime), recovered
    finally:
        await server.stop()


async def test_a_final_record_the_task_folder_refuses_is_stored_once_it_takes_writes_again(
    rig: RigFactory, project: Project, freezer: Freezer
) -> None:
    tasks_dir = project.config.tasks_dir
    async with rig(runtime=HeldRuntime(), options=FAST) as r:
        asked, slug, agent_id = await ended_unwritable(r, freezer, tasks_dir)
        # Not lost: spooled outside the folder, and what the harness says of it is true, in
        # this process and in another one reading the same tasks folder (`harness tasks`).
        assert spooled(tasks_dir) == [f"{agent_id}.json"]
        await says_completed(r.orchestrator, slug, agent_id)
        other = build_orchestrator(project, HeldRuntime())
        try:
            await says_completed(other, slug, agent_id)
        finally:
            await other.shutdown()

        freezer.thaw(tasks_dir / slug)
        # Stored without a restart: the retry takes it once the folder takes writes.
        dispatch = await stored_final(tasks_dir, slug)
        assert dispatch["status"] == "completed"
        assert dispatch["result"]["summary"] == "did: fix the footer"
        assert dispatch["costUsd"] == 0.01 and dispatch["completedAt"]
        assert spooled(tasks_dir) == []
        await says_completed(r.orchestrator, slug, agent_id)

    text = "\n".join(message_text(m) for m in r.bot_messages("D1", asked))
    assert text.count("did: fix the footer") == 1, text  # delivered once
    assert "interrupted" not in text and "Run again" not in text


async def test_a_restart_while_the_final_record_is_pending_applies_it_and_says_no_interrupted(
    rig: RigFactory, project: Project, slack: SlackEmulator, freezer: Freezer
) -> None:
    tasks_dir = project.config.tasks_dir
    async with rig(runtime=HeldRuntime(), options=FAST) as r:
        asked, slug, agent_id = await ended_unwritable(r, freezer, tasks_dir)
    # The bot stopped with the record still pending: it is spooled, task.json says running.
    assert spooled(tasks_dir) == [f"{agent_id}.json"]
    assert stored(tasks_dir, slug)["status"] == "running"

    runtime = HeldRuntime()
    async with bot_started_again(project, slack, runtime) as (again, recovered):
        # Still unwritable at the start: the spooled record stands, nothing is interrupted.
        assert recovered == []
        await says_completed(again.orchestrator, slug, agent_id)
        freezer.thaw(tasks_dir / slug)
        dispatch = await stored_final(tasks_dir, slug)
        assert dispatch["status"] == "completed"
        assert dispatch["result"]["summary"] == "did: fix the footer"
        assert spooled(tasks_dir) == []
        # A follow-up in the thread: anything owed to the thread at the start came before it.
        follow_up = (await again.say("and the header", channel="D1", thread_ts=asked)).event
        await runtime.wait_started(1)
        runtime.release(runtime.started[0].agent_id)
        assert await again.final_reaction("D1", follow_up["ts"]) == "white_check_mark"

    text = "\n".join(message_text(m) for m in again.bot_messages("D1", asked))
    assert text.count("did: fix the footer") == 1, text
    assert "did: and the header" in text
    assert "interrupted" not in text and "Run again" not in text


async def test_a_spooled_final_record_is_applied_at_the_next_start_before_recovery(
    rig: RigFactory, project: Project, slack: SlackEmulator, freezer: Freezer
) -> None:
    tasks_dir = project.config.tasks_dir
    async with rig(runtime=HeldRuntime(), options=FAST) as r:
        asked, slug, agent_id = await ended_unwritable(r, freezer, tasks_dir)
    freezer.thaw(tasks_dir / slug)  # writable again while no bot runs
    assert stored(tasks_dir, slug)["status"] == "running"

    async with bot_started_again(project, slack, HeldRuntime()) as (again, recovered):
        assert recovered == []
        dispatch = stored(tasks_dir, slug)  # applied by the start, before recovery
        assert dispatch["status"] == "completed"
        assert dispatch["result"]["summary"] == "did: fix the footer"
        assert spooled(tasks_dir) == []
        await says_completed(again.orchestrator, slug, agent_id)
        [summary] = await again.orchestrator.tasks.task_summaries()
        assert summary.status == "completed"

    text = "\n".join(message_text(m) for m in again.bot_messages("D1", asked))
    assert text.count("did: fix the footer") == 1, text
    assert "interrupted" not in text and "Run again" not in text


class TestInAGitWorkspace:
    """The same, for an agent that changed files in its task's worktree."""

    @pytest.fixture
    def project(self, project_dir: Path, tmp_path: Path) -> Project:
        repository = make_repository(tmp_path / "web", {"README.md": "web\n"})
        config = add_repositories(project_dir, {"web": repository}, default="web")
        return load_project(config)

    @pytest.mark.git
    async def test_a_diff_the_task_folder_refuses_is_shown_kept_and_saved_once_it_takes_writes(
        self, rig: RigFactory, project: Project, freezer: Freezer
    ) -> None:
        tasks_dir = project.config.tasks_dir
        async with rig(runtime=HeldRuntime(), options=FAST) as r:
            asked, slug, agent_id = await frozen_at_work(r, freezer, tasks_dir, footer=True)
            r.held.release(agent_id)
            assert await r.final_reaction("D1", asked) == "white_check_mark"
            await result_posted(r, "D1", asked, "+new footer")  # the diff, in the result
            record = await r.orchestrator.record(agent_id)
            assert record.diff_file is not None
            assert "+new footer" in (await r.orchestrator.tasks.diff(slug, record) or "")

            freezer.thaw(tasks_dir / slug)
            dispatch = await stored_final(tasks_dir, slug)
            assert dispatch["status"] == "completed" and dispatch["diffFile"]
            saved = (tasks_dir / slug / dispatch["diffFile"]).read_text(encoding="utf-8")
            assert "footer.txt" in saved and "+new footer" in saved
            assert not list((tasks_dir / PENDING_FOLDER).iterdir())  # nothing left spooled

        text = "\n".join(message_text(m) for m in r.bot_messages("D1", asked))
        assert text.count("did: fix the footer") == 1, text

    @pytest.mark.git
    async def test_a_diff_still_refused_when_the_bot_stops_is_saved_by_its_next_start(
        self, rig: RigFactory, project: Project, slack: SlackEmulator, freezer: Freezer
    ) -> None:
        tasks_dir = project.config.tasks_dir
        async with rig(runtime=HeldRuntime(), options=FAST) as r:
            asked, slug, agent_id = await frozen_at_work(r, freezer, tasks_dir, footer=True)
            r.held.release(agent_id)
            assert await r.final_reaction("D1", asked) == "white_check_mark"
        freezer.thaw(tasks_dir / slug)  # writable again while no bot runs

        async with bot_started_again(project, slack, HeldRuntime()) as (again, recovered):
            assert recovered == []
            dispatch = stored(tasks_dir, slug)  # applied by the start, its diff first
            assert dispatch["status"] == "completed" and dispatch["diffFile"]
            saved = (tasks_dir / slug / dispatch["diffFile"]).read_text(encoding="utf-8")
            assert "+new footer" in saved
            record = await again.orchestrator.record(agent_id)
            assert "+new footer" in (await again.orchestrator.tasks.diff(slug, record) or "")
            assert not list((tasks_dir / PENDING_FOLDER).iterdir())


async def test_a_finished_agent_whose_record_is_pending_holds_no_share_of_the_task_budget(
    project: Project, freezer: Freezer
) -> None:
    """Its cost is spent, its allowance no longer held: a follow-up meanwhile is refused
    only for what really stops it (the folder), never as over the budget."""
    config = project.config
    config = dataclasses.replace(config, mcp=dataclasses.replace(config.mcp, task_budget_usd=3.0))
    runtime = HeldRuntime()
    orchestrator = build_orchestrator(dataclasses.replace(project, config=config), runtime)
    try:
        first = await orchestrator.draft("developer", "fix the footer")
        await runtime.wait_started(1)
        assert (await orchestrator.record(first.agent_id)).budget_usd == 3.0  # all of it
        freezer.freeze(config.tasks_dir / first.task_slug)
        runtime.release(first.agent_id)
        done = await orchestrator.wait(first.agent_id, WAIT)
        assert done.status == "completed" and done.cost_usd == 0.01
        assert spooled(config.tasks_dir) == [f"{first.agent_id}.json"]  # pending

        with pytest.raises((HarnessError, OSError)) as refused:
            await orchestrator.draft("developer", "and the header", task_slug=first.task_slug)
        assert not isinstance(refused.value, LimitError), str(refused.value)
        assert "budget" not in str(refused.value)

        freezer.thaw(config.tasks_dir / first.task_slug)
        await stored_final(config.tasks_dir, first.task_slug)
        again = await orchestrator.draft("developer", "and the header", task_slug=first.task_slug)
        assert (await orchestrator.record(again.agent_id)).budget_usd == pytest.approx(2.99)
        runtime.release(again.agent_id)
        assert (await orchestrator.wait(again.agent_id, WAIT)).status == "completed"
    finally:
        await orchestrator.shutdown()
