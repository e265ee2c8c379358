"""Routines through the real bot against the Slack emulator: a schedule firing with an
injected clock (the real CLI on the scripted model), a restart across a firing time, the HTTP
trigger with and without its token, a GitHub event delivered twice, the routine that pauses
itself after failed runs, and `harness routines` (the real command) reaching the running bot."""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.server import BotServer
from bot.testing.slack_emulator import SlackEmulator
from harness.routines.state import RoutineStates
from harness.runtime.claude import ClaudeRuntime
from harness.testing import spawn
from harness.testing.clock import FakeClock
from harness.testing.held_runtime import HeldRuntime
from harness.testing.scripted_model import ScriptedModel
from tests.bot.conftest import WAIT, finish_with_prompt, message_text
from tests.bot.routine_bots import openings, post, routine_bot, signed
from tests.routine_support import EVERY_MINUTE, with_routines

pytestmark = pytest.mark.anyio

TOKEN = "deploy-hook-token-0123456789abcdef"
HOOK_SECRET = "hook-secret"
TRIGGERED = """\
  - name: deploy-check
    on: {http: {tokenEnv: DEPLOY_HOOK_TOKEN}}
    role: developer
    channel: C0ROUTINE
    owner: U0OWNER
    prompt: "The deploy of {payload.version} finished; check the error rate."
    disableAfterFailures: 2
    budgetUsd: 0.5
  - name: review-prs
    on: {github: [pull_request.opened]}
    role: reviewer
    channel: C0ROUTINE
    prompt: "Review {pull_request.html_url}: {pull_request.title}"
"""


@pytest.fixture
def config(project_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DEPLOY_HOOK_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_WEBHOOK_SECRET", HOOK_SECRET)
    return with_routines(project_dir / "config.yaml", EVERY_MINUTE, TRIGGERED)


async def call(
    server: BotServer, name: str, body: object, token: str | None = TOKEN
) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return await post(server, f"/routines/{name}", json.dumps(body).encode(), headers)


async def harness(config: Path, *args: str) -> tuple[int, str]:
    process = await spawn.create_subprocess_exec(
        sys.executable, "-m", "harness", "--config", str(config), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(process.communicate(), WAIT)
    assert process.returncode is not None
    return process.returncode, out.decode()


@pytest.mark.slow
async def test_a_schedule_firing_opens_a_thread_in_its_channel_and_the_agent_answers_there(
    config: Path, slack: SlackEmulator
) -> None:
    clock = FakeClock(datetime(2026, 1, 1, 10, 0, 30, tzinfo=UTC))
    async with ScriptedModel(finish_with_prompt) as model:
        runtime = ClaudeRuntime(base_env=model.env())
        async with routine_bot(config, slack, clock, runtime) as server:
            assert server.routines is not None
            await server.routines.service.tick()
            assert openings(slack, "every-minute") == []

            clock.advance(31)  # 10:01:01: the 10:01 slot is due
            await server.routines.service.tick()
            (opening,) = await slack.wait_for(lambda: openings(slack, "every-minute") or None)
            assert "schedule `* * * * *` (UTC)) at 2026-01-01T10:01:00.000Z" in opening["text"]
            assert "<@U0OWNER>" in opening["text"]

            def answered() -> str | None:
                text = "\n".join(message_text(m) for m in slack.thread("C0ROUTINE", opening["ts"]))
                return text if "Done: Find the flakiest test and fix it." in text else None

            await slack.wait_for(answered, WAIT)
            await asyncio.wait_for(server.routines.service.runs_ended(), WAIT)
            states = RoutineStates(server.bot.orchestrator.config.tasks_dir)
            (run,) = states.read("every-minute").runs
            assert (run.status, run.thread is not None) == ("completed", True)
            assert run.cost_usd is not None and run.cost_usd > 0
            task = await server.bot.orchestrator.tasks.task(run.slug or "")
            assert task.trigger is not None and task.trigger.routine == "every-minute"
            assert task.requester == "U0OWNER"
            await server.routines.service.tick()
            assert len(openings(slack, "every-minute")) == 1  # the slot fired once


async def test_a_restart_across_a_firing_time_runs_the_missed_slot_once(
    config: Path, slack: SlackEmulator
) -> None:
    clock, runtime = FakeClock(datetime(2026, 1, 1, 10, 0, 30, tzinfo=UTC)), HeldRuntime()
    async with routine_bot(config, slack, clock, runtime) as server:
        assert server.routines is not None
        await server.routines.service.tick()
    clock.advance(60)  # down at 10:01, back at 10:01:30
    async with routine_bot(config, slack, clock, runtime) as server:
        assert server.routines is not None
        await server.routines.service.tick()
        await server.routines.service.tick()
        (opening,) = await slack.wait_for(lambda: openings(slack, "every-minute") or None)
        assert "at 2026-01-01T10:01:00.000Z" in opening["text"]  # the slot it was down at
        await runtime.wait_started(1)
        runtime.release()
    async with routine_bot(config, slack, clock, runtime) as server:  # and again: nothing new
        assert server.routines is not None
        await server.routines.service.tick()
    assert len(openings(slack, "every-minute")) == 1


async def test_the_http_trigger_needs_its_token_and_answers_with_the_task_and_thread(
    config: Path, slack: SlackEmulator
) -> None:
    runtime = HeldRuntime()
    async with routine_bot(config, slack, FakeClock(), runtime) as server:
        assert await call(server, "deploy-check", {"version": "1.4"}, token=None) == (
            401, {"error": "missing or wrong bearer token"},
        )  # fmt: skip
        assert (await call(server, "deploy-check", {"version": "1.4"}, token="wrong"))[0] == 401
        assert openings(slack, "deploy-check") == []

        status, answer = await call(server, "deploy-check", {"version": "1.4"})
        assert status == 202 and set(answer) == {"slug", "thread"}
        await runtime.wait_started(1)
        assert runtime.started[0].prompt.endswith(
            "The deploy of 1.4 finished; check the error rate."
        )
        assert runtime.started[0].role.max_budget_usd == 0.5  # the routine's budgetUsd
        (opening,) = openings(slack, "deploy-check")
        assert "an HTTP call" in opening["text"]
        assert (await server.bot.orchestrator.tasks.task(answer["slug"])).thread is not None
        metrics = server.bot.metrics.exposition().decode()
        assert 'harness_routine_firings_total{routine="deploy-check",trigger="http"} 1.0' in metrics
        runtime.release()


async def test_in_socket_mode_the_http_trigger_is_served_on_the_health_port(
    config: Path, slack: SlackEmulator
) -> None:
    runtime = HeldRuntime()
    async with routine_bot(config, slack, FakeClock(), runtime, socket=True) as server:
        assert server.health_port not in (None, 0)
        assert (await call(server, "deploy-check", {"version": "3"}, token=None))[0] == 401
        status, answer = await call(server, "deploy-check", {"version": "3"})
        assert status == 202 and answer["slug"]
        await runtime.wait_started(1)
        runtime.release()


async def test_a_github_event_delivered_twice_starts_one_task(
    config: Path, slack: SlackEmulator
) -> None:
    runtime = HeldRuntime()
    event = {
        "action": "opened",
        "pull_request": {"title": "Fix login", "html_url": "https://github.com/acme/web/pull/7"},
        "repository": {"full_name": "acme/web"},
    }
    body, headers = signed(HOOK_SECRET, "pull_request", "d-1", event)
    async with routine_bot(config, slack, FakeClock(), runtime) as server:
        assert (await post(server, "/github/webhook", body, headers))[0] == 202
        assert (await post(server, "/github/webhook", body, headers))[0] == 202  # re-delivered
        await runtime.wait_started(1)
        assert runtime.started[0].prompt.endswith(
            "Review https://github.com/acme/web/pull/7: Fix login"
        )
        (opening,) = openings(slack, "review-prs")
        assert "GitHub pull_request.opened on acme/web" in opening["text"]
        assert "<https://github.com/acme/web/pull/7>" in opening["text"]
        runtime.release()
    assert len(runtime.started) == 1


@pytest.mark.subprocess
async def test_a_routine_failing_twice_pauses_itself_and_tells_its_owner_and_channel(
    config: Path, slack: SlackEmulator
) -> None:
    runtime = HeldRuntime()
    async with routine_bot(config, slack, FakeClock(), runtime) as server:
        for _ in range(2):  # the prompt names {payload.version}: a call without it fails
            status, answer = await call(server, "deploy-check", {"service": "web"})
            assert status == 409 and "{payload.version}" in answer["error"]
        first = openings(slack, "deploy-check")[0]
        said = "\n".join(message_text(m) for m in slack.thread("C0ROUTINE", first["ts"]))
        assert "The routine could not start: the prompt names {payload.version}" in said
        told = [
            c.params for c in slack.calls("chat.postMessage") if "paused itself" in str(c.params)
        ]
        assert {p["channel"] for p in told} == {"C0ROUTINE", "U0OWNER"}

        status, answer = await call(server, "deploy-check", {"version": "2.0"})
        assert status == 409 and answer["error"].startswith("the routine is paused")
        assert runtime.started == []
        metrics = server.bot.metrics.exposition().decode()
        assert 'harness_routine_failures_total{routine="deploy-check"} 2.0' in metrics
        assert 'harness_routine_skips_total{reason="paused",routine="deploy-check"} 1.0' in metrics

        code, listing = await harness(config, "routines", "--json")
        (routine,) = [r for r in json.loads(listing) if r["name"] == "deploy-check"]
        assert routine["paused"]["by"] == "failures" and routine["failures"] == 2
        code, said_run = await harness(config, "routines", "run", "deploy-check")
        assert code != 0 and "is paused" in said_run and "nothing was started" in said_run

        assert (await harness(config, "routines", "resume", "deploy-check"))[0] == 0
        code, said_run = await harness(config, "routines", "run", "every-minute")
        assert code == 0 and "every-minute: started task" in said_run, said_run
        await runtime.wait_started(1)
        (opening,) = openings(slack, "every-minute")
        assert "`harness routines run` by" in opening["text"]
        runtime.release()
        code, listed = await harness(config, "tasks", "--routine", "every-minute", "--json")
        (task,) = json.loads(listed)["tasks"]
        assert (await harness(config, "tasks", "--routine", "nightly", "--json"))[1].count(
            task["slug"]
        ) == 0
        code, shown = await harness(config, "show", task["slug"])
        assert code == 0 and "Trigger: routine every-minute, `harness routines run` by" in shown


async def test_harness_routines_in_slack_and_the_home_tab_run_and_pause_for_the_owner_only(
    config: Path, slack: SlackEmulator
) -> None:
    runtime = HeldRuntime()
    clock = FakeClock(datetime.now(UTC))  # Slack's requests are signed at the real time
    async with routine_bot(config, slack, clock, runtime):
        shown = await slack.slash_command("/harness", "routines", "U0OWNER", "C0ROUTINE")
        answer = shown.response_payload
        text = json.dumps(answer, ensure_ascii=False)
        assert "*every-minute* · schedule * * * * * (UTC) · next" in text
        assert "deploy-check" in text and "0/2 failures in a row" in text
        buttons = [e for b in answer["blocks"] if b["type"] == "actions" for e in b["elements"]]
        # the owner may operate the two routines that name them, not review-prs (no owner)
        assert [(b["action_id"], b["value"]) for b in buttons if b["value"] == "deploy-check"] == [
            ("routine_run", "deploy-check"), ("routine_pause", "deploy-check"),
        ]  # fmt: skip
        assert not [b for b in buttons if b["value"] == "review-prs"]
        other = await slack.slash_command("/harness", "routines", "U0OTHER", "C0ROUTINE")
        assert "routine_run" not in json.dumps(other.response_payload)

        posted = await slack.user_message("U0OWNER", "C0ROUTINE", "here")  # a message to click on
        ts = posted.event["ts"]

        async def click(user: str, action: str) -> str:
            """Clicks and waits for the answer the clicker sees (clicks are answered apart)."""
            before = len(slack.ephemeral(user))
            await slack.block_action(user, "C0ROUTINE", ts, action, "every-minute")
            shown = await slack.wait_for(lambda: slack.ephemeral(user)[before:] or None)
            return str(shown[0].get("text"))

        assert "Only the routine's owner and the admins" in await click("U0OTHER", "routine_run")
        assert await click("U0OWNER", "routine_pause") == "*every-minute* is paused."
        refused = await click("U0OWNER", "routine_run")
        assert refused.startswith("*every-minute* did not start: the routine is paused (paused")
        assert openings(slack, "every-minute") == [] and runtime.started == []

        assert await click("U0OWNER", "routine_resume") == "*every-minute* is resumed."
        assert (await click("U0OWNER", "routine_run")).startswith("Started *every-minute*")
        (opening,) = await slack.wait_for(lambda: openings(slack, "every-minute") or None)
        assert "Run now in Slack" in opening["text"] and "<@U0OWNER>" in opening["text"]
        await runtime.wait_started(1)
        runtime.release()

        await slack.agent.app_home_opened("U0OWNER")  # the App Home has the same section
        view = await slack.wait_for(lambda: slack.agent.home_view("U0OWNER"), WAIT)
        home = json.dumps(view, ensure_ascii=False)
        assert '"text": "Routines"' in home and "*every-minute*" in home
        assert "routine_pause" in home
