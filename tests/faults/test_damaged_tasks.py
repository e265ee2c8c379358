"""A damaged task.json is visible in Slack: ``/harness tasks`` says which tasks cannot be read
and what to run; a reply in such a task's thread is told why nothing starts (no new task
without the thread's history, no agent), and once ``harness repair`` has run the thread
follows up again with its history. With the bot running all along, and after a restart
(the index gone too). A real Bolt app over the emulator; agents held by a scripted runtime;
``harness repair`` run as a person runs it, in its own process."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from bot.settings import BotOptions
from harness.project import Project
from harness.testing import spawn
from harness.testing.held_runtime import HeldRuntime
from tests.bot.conftest import WAIT, Rig, RigFactory

pytestmark = pytest.mark.anyio

FAST = BotOptions(
    status_interval=0.2, delivery_retry_limit=0.1, drain_timeout=1.0, stream_replies=False
)


async def finish(r: Rig, count: int) -> None:
    """Lets the ``count``-th agent of this bot start and finish."""
    await r.held.wait_started(count)
    r.held.release(r.held.started[count - 1].agent_id)


async def first_task(r: Rig, text: str) -> tuple[str, str]:
    """A DM that starts a task, run to the end: (its thread ts, the task's slug)."""
    asked = (await r.say(text)).event["ts"]
    await finish(r, 1)
    assert await r.final_reaction("D1", asked) == "white_check_mark"
    [summary] = await r.orchestrator.tasks.task_summaries()
    return asked, summary.slug


def damage(file: Path, how: str) -> None:
    """Damage task.json as people and crashes do, a second after the store wrote it."""
    data = file.read_bytes()
    if how == "torn":  # cut off after the dispatches, as by a crash mid-write
        data = data[: data.index(b'"decisions"') + 5]
    elif how == "wrong type":  # a hand edit
        parsed = json.loads(data)
        parsed["created"] = 1700000000
        data = json.dumps(parsed, indent=2).encode()
    else:
        data = b"\x00" * len(data)  # not JSON at all
    before = file.stat().st_mtime_ns + 1_000_000_000
    file.write_bytes(data)
    os.utime(file, ns=(before, before))


def task_folders(project: Project) -> list[str]:
    return sorted(p.name for p in project.config.tasks_dir.iterdir() if not p.name.startswith("."))


async def damaged_listing(r: Rig) -> str:
    """What ``/harness tasks`` answers about the tasks it could not read."""
    await r.slack.slash_command("/harness", "tasks", "U1", "C1")
    [listing] = await r.slack.wait_for(
        lambda: [e for e in r.slack.ephemeral("U1") if "could not be read" in e["text"]], WAIT
    )
    return str(listing["text"])


async def refused_reply(r: Rig, thread_ts: str, text: str) -> str:
    """Replies in the thread; the reply must end in ❌: what the bot said there."""
    reply = await r.say(text, thread_ts=thread_ts)
    assert await r.final_reaction("D1", reply.event["ts"]) == "x"
    return str(
        await r.slack.wait_for(
            lambda: "cannot read this thread's task" in (t := r.bot_text("D1", thread_ts)) and t,
            WAIT,
        )
    )


async def harness_repair(project_dir: Path, slug: str) -> str:
    """``harness repair SLUG`` on the bot's machine, in its own process: its output."""
    process = await spawn.create_subprocess_exec(
        *(sys.executable, "-m", "harness", "repair", slug),
        *("--config", str(project_dir / "config.yaml")),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), WAIT)
    assert process.returncode == 0, err.decode()
    return out.decode()


@pytest.mark.subprocess
async def test_a_damaged_task_is_reported_refused_in_its_thread_and_works_again_once_repaired(
    rig: RigFactory, project: Project, project_dir: Path
) -> None:
    async with rig(runtime=HeldRuntime(), options=FAST) as r:
        asked, slug = await first_task(r, "fix the footer")
        damage(project.config.tasks_dir / slug / "task.json", "torn")

        listing = await damaged_listing(r)
        assert "1 task could not be read" in listing
        assert f"• `{slug}` (corrupt task file: (top level): not valid JSON" in listing
        assert f"`harness repair {slug}`" in listing and "bot's machine" in listing

        told = await refused_reply(r, asked, "and the header")
        assert f"I cannot read this thread's task `{slug}`" in told
        assert "not valid JSON" in told
        assert f"`harness repair {slug}` on the bot's machine" in told
        assert len(r.held.started) == 1  # no agent ran for the reply
        assert task_folders(project) == [slug]  # and no task was made without the history

        repaired = await harness_repair(project_dir, slug)
        assert f"Repaired task {slug}." in repaired and "1 dispatch record" in repaired

        again = await r.say("and the header, please", thread_ts=asked)
        await finish(r, 2)
        assert await r.final_reaction("D1", again.event["ts"]) == "white_check_mark"
        follow_up = r.held.started[1]
        assert "did: fix the footer" in follow_up.prompt  # the thread's history came along
        assert follow_up.prompt.rstrip().endswith("and the header, please")
        task = await r.orchestrator.tasks.task(slug)
        assert [d.prompt for d in task.dispatches] == ["fix the footer", "and the header, please"]
        assert task_folders(project) == [slug]
        assert await r.orchestrator.tasks.damaged_tasks() == []


@pytest.mark.parametrize(
    ("how", "index_lost"),
    [("wrong type", True), ("torn", True), ("not JSON", False)],
    ids=["wrong-type-index-lost", "torn-index-lost", "not-json"],
)
async def test_after_a_restart_a_damaged_tasks_thread_still_belongs_to_it(
    rig: RigFactory, project: Project, how: str, index_lost: bool
) -> None:
    async with rig(runtime=HeldRuntime(), options=FAST) as r:
        asked, slug = await first_task(r, "fix the footer")
    damage(project.config.tasks_dir / slug / "task.json", how)
    if index_lost:
        for suffix in ("", "-wal", "-shm"):
            (project.config.tasks_dir / f".index.sqlite3{suffix}").unlink(missing_ok=True)

    async with rig(runtime=HeldRuntime(), options=FAST) as again:
        told = await refused_reply(again, asked, "and the header")
        assert f"I cannot read this thread's task `{slug}`" in told
        assert f"`harness repair {slug}`" in told
        assert again.held.started == []
        assert task_folders(project) == [slug]
        assert f"• `{slug}` (corrupt task file: " in await damaged_listing(again)
