"""A spare's CLI works out its context while it waits for its prompt (the work of its first
turn done ahead), and the model is asked exactly what an unprimed spare would have asked.
The real Claude Code CLI in its sandbox against the scripted model."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest

from harness.cli.offline import scripted_env
from harness.config.roles import Role
from harness.config.settings import WorkspaceSettings
from harness.runtime.claude import ClaudeRuntime
from harness.runtime.spec import AgentControl, AgentSpec
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn
from harness.workspaces.manager import Workspaces
from tests.support import allowing_io

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.subprocess]

WAIT = 60.0


def script(request: ModelRequest) -> Turn:
    return Turn.finish("done")


def developer() -> Role:
    role = Role("developer", "Developer", "worker", "You write code.", "roles/developer.md")
    return dataclasses.replace(role, tools=("Read", "Write", "Bash"))


def plain(body: dict[str, Any]) -> str:
    """The request but for what differs from run to run: the spare's folder, the session and
    device ids (each sandbox has a home of its own)."""
    text = json.dumps(body, sort_keys=True)
    text = re.sub(r"([/-])\.?views[/-][0-9a-f]{12}", r"\1views/<folder>", text)
    text = re.sub(r"[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12}", "<id>", text)
    return re.sub(r'device_id\\+":\\+"[0-9a-f]+', "device_id=<id>", text)


async def first_request(
    model: ScriptedModel, workspaces: Workspaces, runtime: ClaudeRuntime, prompt: str
) -> tuple[bool, dict[str, Any]]:
    """Whether the spare was primed, and the first request its agent made given ``prompt``."""
    folder = await workspaces.sandbox_folders.spare_folder()
    template = AgentSpec(agent_id="spare", role=developer(), prompt="", cwd=str(folder))
    warm = await asyncio.wait_for(runtime.warm(template), WAIT)
    spec = dataclasses.replace(template, agent_id="a0000000001", prompt=prompt)
    asked = len(model.main_requests)
    outcome = await asyncio.wait_for(
        runtime.run_warm(warm, spec, AgentControl(), allowing_io()), WAIT
    )
    assert outcome.status == "completed", outcome.error
    request = model.main_requests[asked]
    assert prompt in request.first_user_text
    return warm.primed, request.body


async def test_a_primed_spare_asks_the_model_exactly_what_an_unprimed_one_would(
    tmp_path: Path,
) -> None:
    async with ScriptedModel(script) as model:
        workspaces = Workspaces(WorkspaceSettings(root=tmp_path / "workspaces"))
        env = scripted_env(model.env())
        # The same prompt for both: the CLI's version stamp in the request is taken from it.
        unprimed, before = await first_request(
            model, workspaces, ClaudeRuntime(base_env=env, prime_spares=False), "write it"
        )
        primed, after = await first_request(
            model, workspaces, ClaudeRuntime(base_env=env), "write it, please"
        )
        _, again = await first_request(
            model, workspaces, ClaudeRuntime(base_env=env, prime_spares=False), "write it, please"
        )

    assert (unprimed, primed) == (False, True)
    # The same system prompt, tools, environment, reminders and prompt: nothing the CLI
    # worked out ahead entered the conversation.
    assert plain(after) == plain(again)
    assert plain(before) != plain(after)  # the comparison sees the prompt
