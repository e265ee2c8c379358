"""A spare's CLI works out its context and runs a priming turn while it waits for its prompt
(the work of its first turn done ahead), its sandbox's proxy answering the priming turn's
model calls itself; the model is asked nothing ahead, and then exactly what an unprimed
spare would have asked. The real Claude Code CLI in its sandbox against the scripted model."""

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
from harness.runtime.spec import AgentControl, AgentSpec, RunOutcome
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn
from harness.workspaces.manager import Workspaces
from tests.support import allowing_io

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.subprocess]

WAIT = 60.0
# The request's headers that say what is asked (the rest: lengths, ids, the connection).
SAME_HEADERS = ("anthropic-beta", "anthropic-version", "user-agent", "x-app")


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


@dataclasses.dataclass(frozen=True)
class Started:
    primed: bool
    held_calls: int  # the model calls its proxy answered itself while it waited
    asked_ahead: int  # the requests the model received while it waited
    body: dict[str, Any]  # the first request its agent made
    headers: dict[str, str]
    outcome: RunOutcome


async def first_request(
    model: ScriptedModel, workspaces: Workspaces, runtime: ClaudeRuntime, prompt: str
) -> Started:
    """A spare made and given ``prompt``: what it did while it waited, then its first request."""
    folder = await workspaces.sandbox_folders.spare_folder()
    template = AgentSpec(agent_id="spare", role=developer(), prompt="", cwd=str(folder))
    before = len(model.requests)
    warm = await asyncio.wait_for(runtime.warm(template), WAIT)
    ahead = len(model.requests) - before
    spec = dataclasses.replace(template, agent_id="a0000000001", prompt=prompt)
    asked = len(model.main_requests)
    outcome = await asyncio.wait_for(
        runtime.run_warm(warm, spec, AgentControl(), allowing_io()), WAIT
    )
    assert outcome.status == "completed", outcome.error
    request = model.main_requests[asked]
    assert prompt in request.first_user_text
    headers = {k.lower(): v for k, v in request.headers.items() if k.lower() in SAME_HEADERS}
    return Started(warm.primed, warm.binding.hold.calls, ahead, request.body, headers, outcome)


async def test_a_primed_spare_asks_the_model_exactly_what_an_unprimed_one_would(
    tmp_path: Path,
) -> None:
    async with ScriptedModel(script) as model:
        workspaces = Workspaces(WorkspaceSettings(root=tmp_path / "workspaces"))
        env = scripted_env(model.env())
        # The same prompt for both: the CLI's version stamp in the request is taken from it.
        unprimed = await first_request(
            model, workspaces, ClaudeRuntime(base_env=env, prime_spares=False), "write it"
        )
        primed = await first_request(
            model, workspaces, ClaudeRuntime(base_env=env), "write it, please"
        )
        again = await first_request(
            model, workspaces, ClaudeRuntime(base_env=env, prime_spares=False), "write it, please"
        )

    assert (unprimed.primed, primed.primed) == (False, True)
    # Its priming turn went as far as its model call, which its proxy answered, unsent.
    assert primed.held_calls >= 1
    assert (unprimed.held_calls, primed.asked_ahead, again.asked_ahead) == (0, 0, 0)
    # The same system prompt, tools, environment, reminders and prompt: nothing the CLI
    # worked out or ran ahead entered the conversation, nor the request's headers.
    assert plain(primed.body) == plain(again.body)
    assert primed.headers == again.headers
    assert plain(unprimed.body) != plain(primed.body)  # the comparison sees the prompt
    # Its run counts as an unprimed one's: the same turns, no cost of the priming.
    assert (primed.outcome.turns, primed.outcome.cost_usd) == (
        again.outcome.turns,
        again.outcome.cost_usd,
    )
