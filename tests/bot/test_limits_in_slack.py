"""The spend limits in Slack, with the real bot against the Slack emulator and held agents (the
limits are the bot's and the ledger's, not the CLI's): a person over their daily limit is told
which limit, what was spent and when it resets, and nothing starts, while another person's
request runs; only an admin's *Raise for this task* lifts it for that task."""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.clicks import click_record
from bot.limits import ONLY_ADMINS, RAISE_LIMITS_ACTION
from harness.clock import timestamp
from harness.config.settings import SlackSettings
from harness.project import Project, load_project
from harness.tasks.files import FileTaskStore
from harness.tasks.ledger import LEDGER_FILE, SqliteLedger
from harness.tasks.model import ThreadRef
from harness.testing import spawn
from harness.testing.held_runtime import HeldRuntime
from harness.testing.records import make_record
from tests.bot.conftest import JSON, WAIT, RigFactory, message_text

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ADMINS = SlackSettings(admins=("UADMIN",))


@pytest.fixture
def project(project_dir: Path) -> Project:
    config = project_dir / "config.yaml"
    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    data["limits"] = {"perPersonUsd": {"day": 20, "month": 200}, "perChannelUsd": {"month": 500}}
    config.write_text(yaml.safe_dump(data), encoding="utf-8")
    return load_project(config)


async def spent_today(project: Project, person: str, usd: float) -> None:
    """What ``person``'s agents already cost today (UTC), written through the task store."""
    store = FileTaskStore(project.config.tasks_dir)
    try:
        task = await store.create("earlier work", requester=person)
        now = timestamp(datetime.now(UTC))
        record = make_record("aearlier", status="completed", cost_usd=usd, started_at=now)
        await store.save_dispatch(task.slug, record)
    finally:
        await store.close()


def usage(project: Project, *args: str) -> str:
    done = spawn.run(
        [sys.executable, "-m", "harness", "usage", *args, "--config", str(project.config.file)],
        capture_output=True, text=True, timeout=60, env={**os.environ}, check=True,
    )  # fmt: skip
    return done.stdout


def replies_with(r: Any, channel: str, ts: str, needle: str) -> list[JSON]:
    return [m for m in r.bot_messages(channel, ts) if needle in message_text(m)]


@pytest.mark.subprocess
async def test_a_person_over_their_daily_limit_is_refused_while_another_persons_request_runs(
    rig: RigFactory, project: Project
) -> None:
    # The agents are held: a run's cost as the real CLI reports it, into the task's record, is
    # proved by tests/harness/agents/test_runs.py::
    # test_a_run_stores_its_structured_result_in_task_json, and in Slack by
    # test_routines_in_slack.py::
    # test_a_schedule_firing_opens_a_thread_in_its_channel_and_the_agent_answers_there.
    await spent_today(project, "U1", 20.0)
    async with rig(runtime=HeldRuntime(), slack_settings=ADMINS) as r:
        r.held.release()
        refused = (await r.say("<@UBOT> fix the login", user="U1", channel="C1")).event["ts"]
        assert await r.final_reaction("C1", refused) == "x"
        [notice] = replies_with(r, "C1", refused, "daily limit")
        said = message_text(notice)
        assert "the daily limit of U1 ($20.00, limits.perPersonUsd.day) is reached" in said
        assert "$20.00 spent today (UTC)" in said and "it resets at" in said
        assert "00:00 UTC" in said

        ran = (await r.say("<@UBOT> fix the logout", user="U2", channel="C1")).event["ts"]
        assert await r.final_reaction("C1", ran) == "white_check_mark"
        [run] = r.held.started  # the only agent that started is U2's
        assert "fix the logout" in run.prompt
        [summary] = [s for s in await r.orchestrator.tasks.task_summaries() if s.requester == "U2"]
        billed = summary.cost_usd  # what the runtime said the run cost
        assert billed and billed > 0 and not summary.cost_simulated

        # The usage view adds up to it: the command, and each person's App Home.
        used = json.loads(usage(project, "--json", "--by", "person"))
        assert {ln["key"]: ln["costUsd"] for ln in used["lines"]} == {"U1": 20.0, "U2": billed}
        assert used["totalUsd"] == pytest.approx(20.0 + billed)
        await r.slack.agent.app_home_opened("U2")
        mine = await r.slack.wait_for(lambda: r.slack.agent.home_view("U2"), WAIT)
        assert f"Today ${billed:.2f} of $20.00 · this month ${billed:.2f} of $200.00" in str(mine)
        assert "Team spend" not in str(mine)
        await r.slack.agent.app_home_opened("UADMIN")
        team = str(await r.slack.wait_for(lambda: r.slack.agent.home_view("UADMIN"), WAIT))
        assert "Team spend this month" in team and "<@U1>: $20.00" in team
        assert "<#C1>: $" in team  # U1's earlier work had no channel; U2's is C1's
        scraped = r.bot.metrics.exposition().decode()
        spend = 'harness_spend_usd_total{channel="C1",person="U2",repository="",role="developer",'
        assert f'{spend}routine=""}} {billed}' in scraped


async def test_only_an_admin_raises_the_limits_for_the_task_and_then_it_starts(
    rig: RigFactory, project: Project
) -> None:
    # The agents are held; a request in a thread run through the real CLI:
    # test_conversations.py::test_a_mention_in_a_channel_starts_one_task_and_a_reply_follows_up.
    await spent_today(project, "U1", 20.0)
    async with rig(runtime=HeldRuntime(), slack_settings=ADMINS) as r:
        r.held.release()
        ts = (await r.say("<@UBOT> fix the login", user="U1", channel="C1")).event["ts"]
        await r.final_reaction("C1", ts)
        [notice] = replies_with(r, "C1", ts, "daily limit")
        [actions] = [b for b in notice["blocks"] if b["type"] == "actions"]
        [button] = actions["elements"]
        assert button["text"]["text"] == "Raise for this task"

        async def press(user: str) -> None:
            await r.slack.block_action(user, "C1", notice["ts"], RAISE_LIMITS_ACTION,
                                       button["value"], thread_ts=ts)  # fmt: skip

        await press("U1")  # the requester is no admin
        [no] = await r.slack.wait_for(lambda: r.slack.ephemeral("U1"), WAIT)
        assert message_text(no) == ONLY_ADMINS
        assert (await r.orchestrator.tasks.task(button["value"])).limits_raised_by is None
        await press("UADMIN")
        await r.slack.wait_for(lambda: replies_with(r, "C1", ts, "raised the spend limits"), WAIT)
        assert (await r.orchestrator.tasks.task(button["value"])).limits_raised_by == "UADMIN"

        again = await r.say("go on please", user="U1", channel="C1", thread_ts=ts)
        assert await r.final_reaction("C1", again.event["ts"]) == "white_check_mark"
        assert len(r.held.started) == 1


async def test_a_raise_pressed_just_before_a_stop_is_carried_out_at_the_next_start(
    rig: RigFactory, project: Project
) -> None:
    await spent_today(project, "U1", 20.0)
    async with rig(runtime=HeldRuntime(), slack_settings=ADMINS) as r:
        ts = (await r.say("<@UBOT> fix the login", user="U1", channel="C1")).event["ts"]
        await r.final_reaction("C1", ts)
        [slug] = [s.slug for s in await r.orchestrator.tasks.task_summaries() if s.thread]

    # What the admin's press left in the ledger when the bot died before lifting the limits.
    ledger = await SqliteLedger.open(project.config.tasks_dir / LEDGER_FILE)
    try:
        key, data = click_record("limits", slug, "UADMIN", ThreadRef("C1", ts), None)
        await ledger.remember((), intake={key: data})
    finally:
        await ledger.close()

    async with rig(runtime=HeldRuntime(), slack_settings=ADMINS) as again:
        await again.slack.wait_for(
            lambda: replies_with(again, "C1", ts, "raised the spend limits"), WAIT
        )
        assert (await again.orchestrator.tasks.task(slug)).limits_raised_by == "UADMIN"
        assert [k for k, _, _ in await again.bot.ledger.intake() if k == key] == []
