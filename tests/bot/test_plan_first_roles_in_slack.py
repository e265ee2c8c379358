"""Plan first set on a role, and an approval kept across a restart, in a Slack thread: every
person's request to a role with ``planFirst: true`` plans first (read-only, with *Approve and
implement*), while an agent's draft of that role just works; an *Approve and implement*
click the ledger kept when the bot stopped is carried out at its next start, once. Real Bolt
app, real Claude Code CLI against the scripted model, the Slack emulator."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.clicks import click_record
from bot.plans import APPROVE_ACTION, CHANGES_ACTION
from harness.project import Project, load_project
from harness.tasks.ledger import LEDGER_FILE, SqliteLedger
from harness.tasks.model import ThreadRef
from harness.testing.scripted_model import ModelRequest, Turn
from tests.bot.conftest import WAIT, RigFactory, message_text
from tests.bot.test_plans_in_slack import PLANNING, buttons, plan_messages, task_of, team

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

DRAFT = "mcp__harness__draft_agent"
AWAIT = "mcp__harness__await_agent"


@pytest.fixture
def project(project_dir: Path) -> Project:
    """The shipped roles, the reviewer's front matter asking for a plan first."""
    reviewer = project_dir / "roles" / "reviewer.md"
    text = reviewer.read_text(encoding="utf-8")
    reviewer.write_text(
        text.replace("category: worker\n", "category: worker\nplanFirst: true\n", 1),
        encoding="utf-8",
    )
    return load_project(project_dir / "config.yaml")


def reviewing(request: ModelRequest) -> Turn:
    """The analyst drafts a reviewer and awaits it; a reviewer plans or reviews."""
    results = request.all_tool_results
    if DRAFT in request.tool_names:
        if not results:
            return Turn.call(DRAFT, role="reviewer", prompt="review the colours")
        if len(results) == 1:
            return Turn.call(AWAIT, agentId=results[0].json()["agentId"])
        return Turn.finish(f"analyst: {results[-1].json()['result']['summary']}")
    if PLANNING in request.first_user_text:
        return Turn.finish("plan: read login.py, then the tests")
    return Turn.finish("reviewed: looks right")


async def test_every_request_to_a_plan_first_role_plans_while_an_agents_draft_of_it_does_not(
    rig: RigFactory, project: Project
) -> None:
    assert project.roles["reviewer"].plan_first
    async with rig(reviewing) as r:
        # A person's request to the reviewer: a plan, with the buttons, no review yet.
        ts = (await r.say("<@UBOT> review the login form", channel="C1")).event["ts"]
        assert await r.final_reaction("C1", ts) == "white_check_mark"
        [plan] = plan_messages(r, "C1", ts)
        assert "plan: read login.py" in message_text(plan)
        assert {APPROVE_ACTION, CHANGES_ACTION} <= set(buttons(plan))
        [planner] = (await task_of(r, "C1", ts)).dispatches
        assert (planner.role, planner.plan) == ("reviewer", True)
        assert "reviewed" not in r.bot_text("C1", ts)

        # The analyst's own draft of a reviewer reviews at once: no plan, no buttons.
        other = (await r.say("<@UBOT> plan: colours", channel="C2")).event["ts"]
        assert await r.final_reaction("C2", other) == "white_check_mark"
        analyst, drafted = (await task_of(r, "C2", other)).dispatches
        assert (analyst.role, analyst.plan) == ("product-analyst", False)
        assert (drafted.role, drafted.plan, drafted.parent_id) == (
            "reviewer",
            False,
            analyst.agent_id,
        )
        assert "analyst: reviewed: looks right" in r.bot_text("C2", other)
        assert plan_messages(r, "C2", other) == []
        drafted_run = next(q for q in r.runs() if "review the colours" in q.first_user_text)
        assert PLANNING not in drafted_run.first_user_text


async def test_an_approval_kept_when_the_bot_stopped_is_carried_out_once_at_the_next_start(
    rig: RigFactory, project: Project
) -> None:
    async with rig(team) as r:
        ts = (await r.say("plan first: a settings page")).event["ts"]
        assert await r.final_reaction("D1", ts) == "white_check_mark"
        [plan] = plan_messages(r, "D1", ts)
        [planner] = (await task_of(r, "D1", ts)).dispatches

    # What the requester's click left in the ledger when the bot died before the developer
    # started: the approval kept, nothing drafted.
    ledger = await SqliteLedger.open(project.config.tasks_dir / LEDGER_FILE)
    try:
        extra = {"model": "opus", "notice": {k: plan[k] for k in ("ts", "text", "blocks")}}
        key, data = click_record("plan", planner.agent_id, "U1", ThreadRef("D1", ts), extra)
        await ledger.remember((), intake={key: data})
    finally:
        await ledger.close()

    async with rig(team) as again:
        await again.slack.wait_for(
            lambda: "wrote settings.html" in again.bot_text("D1", ts) or None, WAIT
        )
        _planner, developer = (await task_of(again, "D1", ts)).dispatches
        assert (developer.role, developer.plan, developer.model) == ("developer", False, "opus")
        assert developer.requested_by == "U1"
        assert (Path(developer.cwd) / "settings.html").read_text() == "ok\n"
        assert "approved by U1" in again.runs()[-1].first_user_text
        [approved] = [m for m in again.bot_messages("D1", ts) if m["ts"] == plan["ts"]]
        assert APPROVE_ACTION not in buttons(approved)
        assert "approved the plan" in str(approved["blocks"])

    # Carried out once: the click is settled, so no later start takes it up again.
    ledger = await SqliteLedger.open(project.config.tasks_dir / LEDGER_FILE)
    try:
        assert [k for k, _, _ in await ledger.intake() if k == key] == []
    finally:
        await ledger.close()
