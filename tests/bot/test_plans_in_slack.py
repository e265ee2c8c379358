"""Plan first and the model a request picks, in a Slack thread: a plan-first request runs
read-only and shows *Approve and implement*; only the requester's (or an admin's) click starts
the developer, with the plan in its context; *Request changes* sends the reply back to the
planner, read-only again; `model:opus` reaches the model API as the request's model and the
footer names it; a model the role does not allow is refused with the list, and nothing
starts. Real Bolt app, real Claude Code CLI against the scripted model, the Slack emulator."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from bot.blocks import RERUN_ACTION, RERUN_MODEL_ACTION
from bot.plans import APPROVE_ACTION, CHANGES_ACTION, MODEL_ACTION, PLAN_BLOCK
from bot.settings import BotOptions
from bot.surfaces import PLAN_SHORTCUT
from harness.tasks.model import Task, ThreadRef
from harness.testing.held_runtime import HeldRuntime
from harness.testing.scripted_model import ModelRequest, Turn
from tests.bot.conftest import Rig, RigFactory, message_text

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

_CWD = re.compile(r"Primary working directory: (\S+)")
PLANNING = "make your result the plan"  # in a planner's prompt only


def cwd_of(request: ModelRequest) -> str:
    found = _CWD.search(request.system_text)
    assert found, "the CLI names the working directory"
    return found.group(1)


def team(request: ModelRequest) -> Turn:
    """A planner tries to write a file, then plans; an implementer writes the page."""
    done = request.all_tool_results
    if PLANNING in request.first_user_text:
        if not done:
            return Turn.call("Write", file_path=f"{cwd_of(request)}/planned.txt", content="x\n")
        return Turn.finish("plan: one page, settings.html", ["settings.html: a new page"])
    if not done:
        return Turn.call("Write", file_path=f"{cwd_of(request)}/settings.html", content="ok\n")
    return Turn.finish("wrote settings.html", ["settings.html: new"])


def buttons(message: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        str(e.get("action_id")): e
        for block in message.get("blocks") or []
        for e in block.get("elements") or []
        if e.get("action_id")
    }


def plan_messages(r: Rig, channel: str, thread: str) -> list[dict[str, Any]]:
    return [m for m in r.bot_messages(channel, thread) if APPROVE_ACTION in buttons(m)]


async def task_of(r: Rig, channel: str, thread: str) -> Task:
    task = await r.orchestrator.tasks.find_task(ThreadRef(channel, thread))
    assert task is not None
    return task


async def test_a_plan_first_request_plans_read_only_and_only_the_approval_starts_the_developer(
    rig: RigFactory,
) -> None:
    async with rig(team) as r:
        ts = (await r.say("<@UBOT> plan first: a settings page", channel="C1")).event["ts"]
        assert await r.final_reaction("C1", ts) == "white_check_mark"
        [plan] = plan_messages(r, "C1", ts)
        assert "plan: one page, settings.html" in message_text(plan)
        assert set(buttons(plan)) == {APPROVE_ACTION, CHANGES_ACTION, MODEL_ACTION}
        [planner] = (await task_of(r, "C1", ts)).dispatches
        assert (planner.role, planner.plan) == ("developer", True)
        [asked] = r.runs()
        # Routed as a request to the developer, not to the analyst's `^plan` rule, and
        # offered nothing that writes: its Write never ran.
        assert not {"Write", "Edit", "Bash"} & set(asked.tool_names)
        assert not (Path(planner.cwd) / "planned.txt").exists()
        assert "No such tool available: Write" in r.model.main_requests[-1].tool_results[0].text

        value = planner.agent_id
        await r.slack.block_action("U2", "C1", plan["ts"], APPROVE_ACTION, value)
        refusal = await r.slack.wait_for(lambda: r.slack.ephemeral("U2"))
        assert "can approve this plan" in refusal[-1]["text"]
        assert len((await task_of(r, "C1", ts)).dispatches) == 1  # nothing started

        await r.slack.block_action("U1", "C1", plan["ts"], APPROVE_ACTION, value)
        await r.slack.wait_for(lambda: "wrote settings.html" in r.bot_text("C1", ts) or None, 30)
        planner, developer = (await task_of(r, "C1", ts)).dispatches
        assert (developer.role, developer.plan, developer.requested_by) == (
            "developer",
            False,
            "U1",
        )
        implementer = r.runs()[-1]
        assert "plan: one page, settings.html" in implementer.first_user_text  # its context
        assert "approved by U1" in implementer.first_user_text
        assert "Write" in implementer.tool_names
        assert (Path(developer.cwd) / "settings.html").read_text() == "ok\n"
        [approved] = [m for m in r.bot_messages("C1", ts) if m["ts"] == plan["ts"]]
        assert APPROVE_ACTION not in buttons(approved)  # approved once: the buttons are gone
        await r.slack.block_action("U1", "C1", plan["ts"], APPROVE_ACTION, value, seen=plan)
        await r.slack.wait_for(lambda: r.slack.ephemeral("U1"))
        assert len((await task_of(r, "C1", ts)).dispatches) == 2


async def test_changes_requested_go_back_to_the_planner_read_only(rig: RigFactory) -> None:
    async with rig(team) as r:
        ts = (await r.say("plan first: a settings page")).event["ts"]
        assert await r.final_reaction("D1", ts) == "white_check_mark"
        [plan] = plan_messages(r, "D1", ts)
        [first] = (await task_of(r, "D1", ts)).dispatches
        await r.slack.block_action("U1", "D1", plan["ts"], CHANGES_ACTION, first.agent_id)
        await r.slack.wait_for(lambda: "what should change" in r.bot_text("D1", ts) or None)

        reply = await r.say("use tabs, not a single page", thread_ts=ts)
        assert await r.final_reaction("D1", reply.event["ts"]) == "white_check_mark"
        _first, second = (await task_of(r, "D1", ts)).dispatches
        assert (second.role, second.plan) == ("developer", True)
        revised = r.runs()[-1]
        assert "use tabs, not a single page" in revised.first_user_text
        assert "asked for changes" in revised.first_user_text
        assert not {"Write", "Edit", "Bash"} & set(revised.tool_names)
        assert len(plan_messages(r, "D1", ts)) == 2  # the revised plan has its buttons

        await r.slack.block_action("U1", "D1", plan["ts"], APPROVE_ACTION, first.agent_id)
        refusal = await r.slack.wait_for(lambda: r.slack.ephemeral("U1"))
        assert "A newer plan" in refusal[-1]["text"]
        assert len((await task_of(r, "D1", ts)).dispatches) == 2


def picked(model: str) -> dict[str, Any]:
    """The click's state with ``model`` picked in the plan's model menu."""
    option = {"text": {"type": "plain_text", "text": model}, "value": model}
    return {PLAN_BLOCK: {MODEL_ACTION: {"type": "static_select", "selected_option": option}}}


async def test_the_model_picked_in_the_plans_menu_implements_it(rig: RigFactory) -> None:
    async with rig(team) as r:
        ts = (await r.say("model:opus plan first: a settings page")).event["ts"]
        assert await r.final_reaction("D1", ts) == "white_check_mark"
        [plan] = plan_messages(r, "D1", ts)
        menu = buttons(plan)[MODEL_ACTION]
        assert [o["value"] for o in menu["options"]] == ["sonnet", "opus", "haiku"]
        assert menu["initial_option"]["value"] == "opus"  # the plan's own model
        assert r.runs()[0].model == "claude-opus-5-5"
        [planner] = (await task_of(r, "D1", ts)).dispatches

        forged = picked("fable")  # not on the menu: refused, nothing starts
        await r.slack.block_action("U1", "D1", plan["ts"], APPROVE_ACTION, planner.agent_id,
                                   state=forged)  # fmt: skip
        refusal = await r.slack.wait_for(lambda: r.slack.ephemeral("U1"))
        assert "does not allow the model `fable`" in refusal[-1]["text"]

        await r.slack.block_action("U1", "D1", plan["ts"], APPROVE_ACTION, planner.agent_id,
                                   state=picked("haiku"))  # fmt: skip
        await r.slack.wait_for(lambda: "wrote settings.html" in r.bot_text("D1", ts) or None, 30)
        _planner, developer = (await task_of(r, "D1", ts)).dispatches
        assert developer.model == "haiku" and not developer.plan
        assert r.runs()[-1].model == "claude-haiku-5-5"
        [result] = [m for m in r.bot_messages("D1", ts) if "wrote settings" in message_text(m)]
        assert "model `haiku`" in result["blocks"][-1]["elements"][0]["text"]  # its footer


async def test_the_plan_shortcut_asks_for_a_plan_on_that_message(rig: RigFactory) -> None:
    async with rig(team) as r:
        said = await r.slack.user_message("U2", "C1", "the login page is slow on Mondays")
        ts = said.event["ts"]
        await r.slack.agent.message_shortcut("U1", "C1", ts, PLAN_SHORTCUT)
        assert await r.final_reaction("C1", ts) == "white_check_mark"
        assert len(plan_messages(r, "C1", ts)) == 1
        [planner] = (await task_of(r, "C1", ts)).dispatches
        assert planner.plan and planner.requested_by == "U1"
        assert "the login page is slow on Mondays" in r.runs()[0].first_user_text


def finish_at_once(request: ModelRequest) -> Turn:
    return Turn.finish("done")


async def test_model_opus_reaches_the_model_api_and_the_footer_names_it(
    rig: RigFactory,
) -> None:
    async with rig(finish_at_once) as r:
        ts = (await r.say("model:opus fix the login form")).event["ts"]
        assert await r.final_reaction("D1", ts) == "white_check_mark"
        [run] = r.runs()
        assert run.model == "claude-opus-5-5"  # what the CLI sends for `opus`
        assert "model:opus" not in run.first_user_text
        [record] = (await task_of(r, "D1", ts)).dispatches
        assert record.model == "opus"
        footer = r.bot_messages("D1", ts)[-1]["blocks"][-1]
        assert footer["type"] == "context" and "model `opus`" in footer["elements"][0]["text"]

        reply = await r.say("model:haiku now the signup form", thread_ts=ts)
        assert await r.final_reaction("D1", reply.event["ts"]) == "white_check_mark"
        assert r.runs()[-1].model == "claude-haiku-5-5"


async def test_a_model_the_role_does_not_allow_is_refused_with_the_list_and_no_task_is_made(
    rig: RigFactory,
) -> None:
    # The agents are held: a picked model reaching the model API through the real CLI is
    # proved by test_model_opus_reaches_the_model_api_and_the_footer_names_it.
    async with rig(runtime=HeldRuntime()) as r:
        r.held.release()
        ts = (await r.say("<@UBOT> model:fable fix the login form", channel="C1")).event["ts"]
        assert await r.final_reaction("C1", ts) == "x"
        text = r.bot_text("C1", ts)
        assert "does not allow the model `fable`; it allows `sonnet`, `opus`, `haiku`" in text
        assert await r.orchestrator.tasks.find_task(ThreadRef("C1", ts)) is None
        assert await r.orchestrator.tasks.task_summaries() == []
        assert r.held.started == []

        # The thread stays free: the request sent again there, with a model allowed, runs.
        again = await r.say("<@UBOT> model:opus fix the login form", channel="C1", thread_ts=ts)
        assert await r.final_reaction("C1", again.event["ts"]) == "white_check_mark"
        [record] = (await task_of(r, "C1", ts)).dispatches
        assert record.model == "opus"
        assert len(r.held.started) == 1
        assert len(await r.orchestrator.tasks.task_summaries()) == 1


async def test_a_message_of_only_a_model_is_told_to_say_what_the_agent_should_do(
    rig: RigFactory,
) -> None:
    # The agents are held; a request's run through the real CLI:
    # test_model_opus_reaches_the_model_api_and_the_footer_names_it.
    async with rig(runtime=HeldRuntime()) as r:
        r.held.release()
        await r.say("model:opus")
        [told] = await r.slack.wait_for(lambda: r.slack.ephemeral("U1"))
        assert "Say what the agent should do after `model:opus`" in told["text"]

        ts = (await r.say("fix the login form")).event["ts"]
        assert await r.final_reaction("D1", ts) == "white_check_mark"
        await r.say("plan first: model:haiku", thread_ts=ts)  # a follow-up of directives alone
        second = await r.slack.wait_for(lambda: r.slack.ephemeral("U1")[1:] or None)
        assert "after `plan first: model:haiku`" in second[0]["text"]
        assert len(r.held.started) == 1  # neither started an agent
        assert len(await r.orchestrator.tasks.task_summaries()) == 1


# Retries a tenth of a second apart, and a short wait for Slack at shutdown.
FAST = BotOptions(
    status_interval=0.2, delivery_retry_limit=0.1, drain_timeout=1.0, stream_replies=False
)


@pytest.mark.waits
async def test_an_interrupted_agent_runs_again_with_the_model_picked_beside_run_again(
    rig: RigFactory,
) -> None:
    async with rig(runtime=HeldRuntime(), options=FAST) as r:
        ts = (await r.say("model:haiku fix the footer")).event["ts"]
        await r.held.wait_started(1)
    async with rig(runtime=HeldRuntime(), options=FAST) as again:

        def notice() -> dict[str, Any] | None:
            found = [m for m in again.bot_messages("D1", ts) if RERUN_ACTION in buttons(m)]
            return found[0] if found else None

        shown = await again.slack.wait_for(notice, 30)
        [interrupted] = (await task_of(again, "D1", ts)).dispatches
        menu = buttons(shown)[RERUN_MODEL_ACTION]
        agent = interrupted.agent_id
        assert [o["value"] for o in menu["options"]] == [
            f"{agent} sonnet",
            f"{agent} opus",
            f"{agent} haiku",
        ]
        await again.slack.block_action("U1", "D1", shown["ts"], RERUN_MODEL_ACTION, f"{agent} opus")
        await again.held.wait_started(1)
        _interrupted, rerun = (await task_of(again, "D1", ts)).dispatches
        assert (interrupted.model, rerun.model) == ("haiku", "opus")
