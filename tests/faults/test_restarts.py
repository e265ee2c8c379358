"""The bot stopped and started again: deliveries it saw are not run twice, and an agent a stop
interrupted is announced in its thread with a *Run again* button for the person who asked.
A real Bolt app over the emulator, twice on one tasks folder; agents held by a scripted
runtime."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from bot.progress import Watch
from bot.settings import BotOptions
from bot.testing.slack_emulator import SlackEmulator
from bot.testing.slack_model import DeliveredEvent
from harness.project import Project
from harness.tasks.ledger import LEDGER_FILE, SqliteLedger
from harness.tasks.model import DispatchRecord, DispatchStatus, ThreadRef
from harness.tasks.store import FileTaskStore
from harness.testing.held_runtime import HeldRuntime
from tests.bot.conftest import WAIT, Rig, RigFactory, message_text

pytestmark = pytest.mark.anyio

FAST = BotOptions(
    status_interval=0.2, delivery_retry_limit=0.1, drain_timeout=1.0, stream_replies=False
)


async def finish(r: Rig, count: int) -> None:
    """Lets the ``count``-th agent of this bot start and finish."""
    await r.held.wait_started(count)
    r.held.release(r.held.started[count - 1].agent_id)


def results(r: Rig, channel: str, thread_ts: str) -> list[str]:
    return [m for m in map(message_text, r.bot_messages(channel, thread_ts)) if "finished" in m]


async def test_a_follow_up_delivered_again_after_a_restart_is_not_run_again(
    rig: RigFactory,
) -> None:
    async with rig(runtime=HeldRuntime(), options=FAST) as r:
        asked = (await r.say("fix the footer", channel="D1")).event["ts"]
        await finish(r, 1)
        assert await r.final_reaction("D1", asked) == "white_check_mark"
        follow_up = await r.say("and the header", channel="D1", thread_ts=asked)
        await finish(r, 2)
        assert await r.final_reaction("D1", follow_up.event["ts"]) == "white_check_mark"

    async with rig(runtime=HeldRuntime(), options=FAST) as again:
        # Slack had not seen the ack, so it delivers the follow-up again, and the first too.
        retried = await again.slack.deliver_event(follow_up.event, retry_of=follow_up)
        assert retried.acked
        # Events are handled in order: once a later request runs, the retry was decided.
        later = (await again.say("something else", channel="D2")).event["ts"]
        await finish(again, 1)
        assert await again.final_reaction("D2", later) == "white_check_mark"

    assert [spec.prompt.splitlines()[-1] for spec in again.held.started] == ["something else"]
    assert len(results(again, "D1", asked)) == 2


def interrupted_notice(r: Rig, channel: str, thread_ts: str) -> dict[str, Any] | None:
    found = [m for m in r.bot_messages(channel, thread_ts) if "was interrupted" in str(m)]
    return found[-1] if found else None


async def test_an_interrupted_agent_is_announced_and_run_again_once_by_the_requester(
    rig: RigFactory,
) -> None:
    async with rig(runtime=HeldRuntime(), options=FAST) as r:
        asked = (await r.say("fix the footer", channel="D1")).event["ts"]
        await r.held.wait_started(1)
    # The bot stopped while the agent worked: the thread says so, with a way to go on.
    notice = interrupted_notice(r, "D1", asked)
    assert notice is not None
    text = message_text(notice)
    assert "It had been working since" in text and "Run again" in text
    assert "x" in r.slack.reactions("D1", asked)
    [actions] = [b for b in notice["blocks"] if b["type"] == "actions"]
    button = actions["elements"][0]

    async with rig(runtime=HeldRuntime(), options=FAST) as again:
        slack = again.slack
        await slack.block_action(
            "U2", "D1", notice["ts"], button["action_id"], button["value"], thread_ts=asked
        )
        await slack.wait_for(lambda: slack.ephemeral("U2") or None, WAIT)
        await slack.block_action(
            "U1", "D1", notice["ts"], button["action_id"], button["value"], thread_ts=asked
        )
        await finish(again, 1)
        await slack.wait_for(lambda: results(again, "D1", asked) or None, WAIT)
        await slack.block_action(
            "U1", "D1", notice["ts"], button["action_id"], button["value"], thread_ts=asked
        )
        await slack.wait_for(lambda: slack.ephemeral("U1") or None, WAIT)
        [rerun] = again.held.started

    assert "Only <@U1>" in slack.ephemeral("U2")[0]["text"]
    assert "already been run again" in slack.ephemeral("U1")[0]["text"]
    assert rerun.prompt.splitlines()[-1] == "fix the footer"
    updated = interrupted_notice(again, "D1", asked)
    assert updated is not None and f"ran it again as agent `{rerun.agent_id}`" in str(updated)
    assert not [b for b in updated["blocks"] if b["type"] == "actions"]


async def taken_on_and_killed(slack: SlackEmulator, project: Project, text: str) -> DeliveredEvent:
    """A DM in D1 that a bot acked and took on, then died on: in the ledger, not delivered."""
    slack.delivery = "none"
    delivered = await slack.user_message("U1", "D1", text)
    key = f"message:D1:{delivered.event['ts']}"
    ledger = SqliteLedger(project.config.tasks_dir / LEDGER_FILE)
    await ledger.remember(
        [f"event:{delivered.event_id}", key],
        intake={key: {"event": delivered.event, "botUserId": slack.identity.bot_user_id}},
    )
    await ledger.close()
    return delivered


async def test_a_request_taken_on_just_before_a_stop_is_handled_at_the_next_start(
    rig: RigFactory, slack: SlackEmulator, project: Project
) -> None:
    # The bot acked and remembered the DM, then died before any agent started on it.
    delivered = await taken_on_and_killed(slack, project, "fix the footer")

    async with rig(runtime=HeldRuntime(), options=FAST) as r:
        await finish(r, 1)
        asked = delivered.event["ts"]
        assert await r.final_reaction("D1", asked) == "white_check_mark"
        # Slack's own retry of it, now, is a duplicate.
        assert (await r.slack.deliver_event(delivered.event, retry_of=delivered)).acked
        later = (await r.say("something else", channel="D2")).event["ts"]
        await finish(r, 2)
        assert await r.final_reaction("D2", later) == "white_check_mark"
        intake = await r.bot.ledger.intake()

    assert [spec.prompt.splitlines()[-1] for spec in r.held.started] == [
        "fix the footer",
        "something else",
    ]
    assert intake == []


async def test_a_request_whose_task_was_made_before_the_stop_starts_its_agent_at_the_next_start(
    rig: RigFactory, slack: SlackEmulator, project: Project
) -> None:
    # The bot took the DM on and made its task, then died before the agent started.
    delivered = await taken_on_and_killed(slack, project, "fix the footer")
    asked = delivered.event["ts"]
    store = FileTaskStore(project.config.tasks_dir)
    await store.create("fix the footer", ThreadRef("D1", asked))
    await store.close()

    async with rig(runtime=HeldRuntime(), options=FAST) as r:
        await finish(r, 1)
        assert await r.final_reaction("D1", asked) == "white_check_mark"
        [task] = await r.orchestrator.tasks.task_summaries()

    assert [spec.prompt.splitlines()[-1] for spec in r.held.started] == ["fix the footer"]
    assert task.dispatch_count == 1


async def test_a_status_message_posted_just_before_a_kill_becomes_the_interruption_notice(
    rig: RigFactory, slack: SlackEmulator, project: Project
) -> None:
    # The bot posted the agent's status, then died before noting where it was.
    slack.delivery = "none"
    asked = (await slack.user_message("U1", "D1", "fix the footer")).event["ts"]
    status = "⏳ developer is queued… agent a0123456789, 0 s, waiting for a slot"
    slack.store.add("D1", slack.api.bot_message({"text": status, "thread_ts": asked}))
    store = FileTaskStore(project.config.tasks_dir)
    task = await store.create("fix the footer", ThreadRef("D1", asked))
    record = DispatchRecord(
        agent_id="a0123456789",
        role="developer",
        cwd="/w",
        model=None,
        started_at="2026-11-22T10:00:00Z",
        status="interrupted",
        journal_file="journals/a0123456789.jsonl",
        prompt="fix the footer",
        error="the harness process running it stopped",
    )
    await store.save_dispatch(task.slug, record)
    await store.close()
    ledger = SqliteLedger(project.config.tasks_dir / LEDGER_FILE)
    watch = Watch("a0123456789", ThreadRef("D1", asked), task.slug, "developer", reply_to=asked)
    await ledger.watch("a0123456789", watch.to_json())
    await ledger.close()

    async with rig(runtime=HeldRuntime(), options=FAST) as r:
        assert await r.final_reaction("D1", asked) == "x"
        shown = [message_text(m) for m in r.bot_messages("D1", asked)]

    assert not [text for text in shown if "is queued…" in text]
    assert len([text for text in shown if "was interrupted" in text]) == 1


async def agent_started_unwatched(
    slack: SlackEmulator, project: Project, status: DispatchStatus, last_text: str | None = None
) -> str:
    """A DM in D1 (its ts) that a bot took on, made the task of and started an agent for,
    then died before it noted the agent's watch; the agent's record says ``status``."""
    delivered = await taken_on_and_killed(slack, project, "fix the footer")
    asked = str(delivered.event["ts"])
    store = FileTaskStore(project.config.tasks_dir)
    run = await store.begin_run()  # the killed bot's: it ends as the store closes
    task = await store.create("fix the footer", ThreadRef("D1", asked))
    now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    record = DispatchRecord(
        agent_id="a0123456789", role="developer", started_at=now, status=status,
        completed_at=None if status == "running" else now, prompt="fix the footer",
        last_text=last_text, run_id=run,
    )  # fmt: skip
    await store.save_dispatch(task.slug, record)
    await store.close()
    return asked


async def test_an_agent_killed_before_its_watch_was_noted_is_announced_with_the_request_s_x(
    rig: RigFactory, slack: SlackEmulator, project: Project
) -> None:
    # The request is still in the ledger, the agent's record running.
    asked = await agent_started_unwatched(slack, project, "running")

    async with rig(runtime=HeldRuntime(), options=FAST, recover=True) as r:
        assert await r.final_reaction("D1", asked) == "x"
        notice = interrupted_notice(r, "D1", asked)
        intake = await r.bot.ledger.intake()

    assert notice is not None and "Run again" in message_text(notice)
    assert r.held.started == []  # announced, not run again unasked
    assert intake == []


async def test_an_agent_that_finished_on_a_worker_while_the_bot_was_down_unwatched_is_told_once(
    rig: RigFactory, slack: SlackEmulator, project: Project
) -> None:
    # Its worker ran it on, and it finished while the bot was down.
    asked = await agent_started_unwatched(slack, project, "completed", "The footer is fixed.")

    async with rig(runtime=HeldRuntime(), options=FAST, recover=True) as r:
        assert await r.final_reaction("D1", asked) == "white_check_mark"
        intake = await r.bot.ledger.intake()
        watches = await r.bot.ledger.watches()

    [result] = results(r, "D1", asked)
    assert "The footer is fixed." in result
    assert r.held.started == []  # its result told, the request not run again
    assert intake == [] and watches == []
