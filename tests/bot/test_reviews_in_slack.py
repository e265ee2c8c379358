"""Reviews of pull requests from Slack: `review <url>` to the bot (a DM or a mention) and
`/harness review <url>` start the reviewer, its findings go on the pull request as one GitHub
review, and the thread ends with the review's verdict and link; asking again for the same
head points at that review. Real Bolt app, real Claude Code CLI, a loopback GitHub."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.testing.slack_emulator import SlackEmulator
from harness.project import Project
from harness.routines.state import RoutineStates
from harness.runtime.claude import ClaudeRuntime
from harness.testing.clock import FakeClock
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn
from tests.bot.conftest import WAIT, Rig, RigFactory, message_text, session_of
from tests.bot.routine_bots import openings, post, routine_bot, signed
from tests.forge_support import FULL_NAME, Forge, forge, open_pull, posted_reviews, with_forge
from tests.routine_support import with_routines

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.git, pytest.mark.subprocess]
__all__ = ["forge"]  # the fixture, used by name

APP = "def ratio(a, b):\n    return a / b\n"


@pytest.fixture
def project(project_dir: Path, forge: Forge) -> Project:
    return with_forge(project_dir, forge)


def reviewer(request: ModelRequest) -> Turn:
    return Turn.finish("Changes required: b may be 0.", issues=["app.py:2: b may be 0"])


async def shown(r: Rig, channel: str, thread: str, needle: str) -> str:
    return await r.slack.wait_for(
        lambda: r.bot_text(channel, thread) if needle in r.bot_text(channel, thread) else None,
        WAIT,
    )


async def test_review_url_in_a_dm_posts_the_review_and_ends_the_thread_with_its_link(
    rig: RigFactory, forge: Forge
) -> None:
    number = open_pull(forge, "feature", "app.py", APP)
    url = f"{forge.github.web_url}/{FULL_NAME}/pull/{number}"
    async with rig(reviewer) as r:
        asked = (await r.say(f"review <{url}>", channel="D1")).event["ts"]

        text = await shown(r, "D1", asked, "Reviewed acme/web#1")
        [review] = posted_reviews(forge, number)
        assert review["html_url"] in text and "changes required" in text
        assert [(c["path"], c["line"]) for c in review["comments"]] == [("app.py", 2)]
        assert review["user"]["login"] == "harness-bot" and "for U1 (Slack)" in review["body"]
        assert "b may be 0" in text  # the reviewer's result, shown as any agent's
        # The pull request's change is not the reviewer's: nothing offers it as a new one.
        assert not any(m.get("blocks") and "Open pull request" in str(m["blocks"])
                       for m in r.bot_messages("D1", asked))  # fmt: skip

        again = (await r.say(f"review <{url}>", channel="D1")).event["ts"]

        text = await shown(r, "D1", again, "Already reviewed acme/web#1")
        assert review["html_url"] in text and len(posted_reviews(forge, number)) == 1
        assert len(r.runs()) == 1


async def test_harness_review_starts_a_thread_in_the_channel_with_the_reviews_link(
    rig: RigFactory, forge: Forge
) -> None:
    number = open_pull(forge, "feature", "app.py", APP)
    url = f"{forge.github.web_url}/{FULL_NAME}/pull/{number}"
    async with rig(reviewer) as r:
        r.slack.join("U1", "C1")
        await r.slack.slash_command("/harness", f"review {url}", "U1", "C1")

        def thread() -> str | None:
            started = [m for m in r.slack.messages("C1") if "asked for a review" in m["text"]]
            if not started:
                return None
            text = r.bot_text("C1", started[0]["ts"])
            return text if "Reviewed acme/web#1" in text else None

        text = await r.slack.wait_for(thread, WAIT)
        [review] = posted_reviews(forge, number)
        assert review["html_url"] in text


REVIEW_ROUTINE = """\
  - name: review-prs
    on: {github: [pull_request.opened, pull_request.ready_for_review]}
    repository: web
    role: reviewer
    channel: C0ROUTINE
    prompt: "Review {pull_request.html_url}: {pull_request.title}"
"""


async def test_a_routines_pull_request_event_is_reviewed_once_however_often_delivered(
    project_dir: Path, forge: Forge, slack: SlackEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_WEBHOOK_SECRET", "hook-secret")
    with_forge(project_dir, forge)
    config = with_routines(project_dir / "config.yaml", REVIEW_ROUTINE)
    number = open_pull(forge, "feature", "app.py", APP)
    url = f"{forge.github.web_url}/{FULL_NAME}/pull/{number}"
    head = forge.github.pulls(FULL_NAME)[0].head_sha
    pull = {"html_url": url, "title": "Divide", "head": {"sha": head}}
    opened = {"action": "opened", "pull_request": pull, "repository": {"full_name": FULL_NAME}}
    ready = {**opened, "action": "ready_for_review"}
    async with ScriptedModel(reviewer) as model:
        runtime = ClaudeRuntime(base_env=model.env())
        async with routine_bot(config, slack, FakeClock(), runtime) as server:
            assert server.routines is not None
            for delivery, event in (("d-1", opened), ("d-1", opened)):  # d-1 re-delivered
                body, headers = signed("hook-secret", "pull_request", delivery, event)
                assert (await post(server, "/github/webhook", body, headers))[0] == 202
            await asyncio.wait_for(server.routines.service.runs_ended(), WAIT)
            [first] = openings(slack, "review-prs")
            text = await shown_in(slack, first["ts"], "Reviewed acme/web#1")
            [review] = posted_reviews(forge, number)
            assert review["html_url"] in text and review["user"]["login"] == "harness-bot"
            assert [(c["path"], c["line"]) for c in review["comments"]] == [("app.py", 2)]

            # Another event on the same head: its thread points at that review.
            body, headers = signed("hook-secret", "pull_request", "d-2", ready)
            assert (await post(server, "/github/webhook", body, headers))[0] == 202
            await asyncio.wait_for(server.routines.service.runs_ended(), WAIT)
            [_, second] = openings(slack, "review-prs")
            assert review["html_url"] in await shown_in(slack, second["ts"], "Already reviewed")
            assert len({session_of(r) for r in model.main_requests}) == 1  # one reviewer ran
            assert len(posted_reviews(forge, number)) == 1
            states = RoutineStates(server.bot.orchestrator.config.tasks_dir)
            runs = states.read("review-prs").runs
            assert sorted(run.status for run in runs) == ["completed", "completed"]
            task = await server.bot.orchestrator.tasks.task(runs[0].slug or "")
            assert task.trigger is not None and task.trigger.routine == "review-prs"


async def shown_in(slack: SlackEmulator, thread: str, needle: str) -> str:
    def text() -> str | None:
        said = "\n".join(message_text(m) for m in slack.thread("C0ROUTINE", thread))
        return said if needle in said else None

    return await slack.wait_for(text, WAIT)
