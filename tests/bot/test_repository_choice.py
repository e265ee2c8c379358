"""Which repository a Slack request is about: named with repo:NAME, or picked with a button
when several are configured and nothing decides. Agents are held (no CLI); git is real."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.project import Project, load_project
from harness.testing.held_runtime import HeldRuntime
from tests.bot.conftest import RigFactory, message_text
from tests.support import add_repositories, make_repository

pytestmark = [pytest.mark.anyio, pytest.mark.git]

WAIT = 10.0


@pytest.fixture
def project(project_dir: Path, tmp_path: Path) -> Project:
    web, api = make_repository(tmp_path / "web"), make_repository(tmp_path / "api")
    config = add_repositories(project_dir, {"web": web, "api": api})
    return load_project(config)


async def test_an_ambiguous_request_asks_for_the_repository_and_starts_once_picked(
    rig: RigFactory,
) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        ts = (await r.say("fix the login", user="U1")).event["ts"]

        def asked() -> dict[str, Any] | None:
            found = [m for m in r.bot_messages("D1", ts) if "Which repository" in message_text(m)]
            return found[0] if found else None

        question = await r.slack.wait_for(asked, WAIT)
        [actions] = [b for b in question["blocks"] if b["type"] == "actions"]
        buttons = {e["text"]["text"]: e for e in actions["elements"]}
        assert sorted(buttons) == ["api", "web"]
        assert r.held.started == []  # nothing runs until the person picks

        api = buttons["api"]
        await r.slack.block_action(
            "U2", "D1", question["ts"], api["action_id"], api["value"], thread_ts=ts
        )
        await r.slack.wait_for(lambda: r.slack.ephemeral("U2"), WAIT)  # only the asker picks
        await r.slack.block_action(
            "U1", "D1", question["ts"], api["action_id"], api["value"], thread_ts=ts
        )
        await r.held.wait_started(1, WAIT)
        [task] = await r.orchestrator.tasks.task_summaries()
        assert (await r.orchestrator.tasks.task(task.slug)).repository == "api"
        assert r.held.started[0].cwd.endswith(f"/{task.slug}")


async def test_a_request_naming_its_repository_starts_at_once_without_the_word(
    rig: RigFactory,
) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        await r.say("fix the login repo:web")
        await r.held.wait_started(1, WAIT)
        [task] = await r.orchestrator.tasks.task_summaries()
        assert (await r.orchestrator.tasks.task(task.slug)).repository == "web"
        assert r.held.started[0].prompt.strip() == "fix the login"


async def test_a_request_waiting_for_its_repository_still_starts_from_its_buttons_after_a_restart(
    rig: RigFactory,
) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        ts = (await r.say("fix the login", user="U1")).event["ts"]

        def questions() -> list[dict[str, Any]]:
            return [m for m in r.bot_messages("D1", ts) if "Which repository" in message_text(m)]

        [question] = await r.slack.wait_for(questions, WAIT)

    async with rig(runtime=HeldRuntime()) as again:
        [actions] = [b for b in question["blocks"] if b["type"] == "actions"]
        web = next(e for e in actions["elements"] if e["value"] == "web")
        await again.slack.block_action(
            "U1", "D1", question["ts"], web["action_id"], web["value"], thread_ts=ts
        )
        await again.held.wait_started(1, WAIT)
        [task] = await again.orchestrator.tasks.task_summaries()
        assert (await again.orchestrator.tasks.task(task.slug)).repository == "web"
        assert again.held.started[0].prompt.strip().endswith("fix the login")
        assert len(questions()) == 1  # the restart asked nothing again
