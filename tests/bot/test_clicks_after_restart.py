"""A repository picked with its button just before the bot stopped (its agent not started
yet) is not asked for again after the restart: the request starts on the picked repository.
The first bot leaves the ledger as a killed one would (the pick noted with the waiting
request); agents are held (no CLI); git is real."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.project import Project, load_project
from harness.tasks.ledger import LEDGER_FILE, SqliteLedger
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


async def test_a_repository_picked_before_a_stop_starts_the_request_there_after_the_restart(
    rig: RigFactory, project: Project
) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        ts = (await r.say("fix the login", user="U1")).event["ts"]

        def questions() -> list[dict[str, Any]]:
            return [m for m in r.bot_messages("D1", ts) if "Which repository" in message_text(m)]

        await r.slack.wait_for(questions, WAIT)
        assert r.held.started == []

    # What the click on "api" left in the ledger when the bot died before its agent started.
    ledger = await SqliteLedger.open(project.config.tasks_dir / LEDGER_FILE)
    try:
        [(key, data, _at)] = await ledger.intake()
        assert data.get("waitingForRepository")
        await ledger.annotate_intake(key, chosenRepository="api", chosenBy="U1")
    finally:
        await ledger.close()

    async with rig(runtime=HeldRuntime()) as again:
        await again.held.wait_started(1, WAIT)
        [task] = await again.orchestrator.tasks.task_summaries()
        assert (await again.orchestrator.tasks.task(task.slug)).repository == "api"
        assert again.held.started[0].prompt.strip().endswith("fix the login")
        assert len(questions()) == 1  # the restart asked nothing again
