"""``harness bot --mode http --health-port N`` as people run it: the health port serves
/healthz, /metrics, the routines' HTTP triggers and GitHub's webhook in HTTP mode as in Socket
Mode (a health check or a webhook set up for one mode keeps working in the other)."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import aiohttp
import pytest

from tests.bot.clocked_bots import clocked_bot
from tests.bot.conftest import WAIT, bot_outside, finish_with_prompt, message_text
from tests.bot.routine_bots import openings, signed
from tests.routine_support import with_routines

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

TOKEN = "deploy-hook-token-0123456789abcdef"
HOOK_SECRET = "hook-secret"
ROUTINES = """\
  - name: deploy-check
    on: {http: {tokenEnv: DEPLOY_HOOK_TOKEN}}
    role: developer
    channel: C0ROUTINE
    owner: U0OWNER
    prompt: "The deploy of {payload.version} finished; check the error rate."
  - name: on-push
    on: {github: [push]}
    role: developer
    channel: C0ROUTINE
    prompt: "Check the push to {ref}."
"""


async def test_http_mode_serves_health_metrics_and_the_triggers_on_the_health_port(
    project_dir: Path,
) -> None:
    config = with_routines(project_dir / "config.yaml", ROUTINES)
    async with bot_outside(finish_with_prompt) as (_model, slack, env):
        env = {**env, "DEPLOY_HOOK_TOKEN": TOKEN, "GITHUB_WEBHOOK_SECRET": HOOK_SECRET}
        bot_args = ("--mode", "http", "--port", "0", "--health-port", "0")
        async with clocked_bot(config, slack, env, None, bot_args=bot_args) as bot:
            found = re.search(r"health, metrics and webhooks on port (\d+)", bot.banner)
            assert found is not None and found.group(1) != "0", bot.banner
            health = f"http://127.0.0.1:{found.group(1)}"
            assert slack.bot_url is not None and health not in slack.bot_url  # a port apart

            async with aiohttp.ClientSession() as session:
                async with session.get(f"{health}/healthz") as response:
                    assert response.status == 200
                async with session.get(f"{health}/metrics") as response:
                    assert "harness_routine_firings_total" in await response.text()
                call = f"{health}/routines/deploy-check"
                body = json.dumps({"version": "1.4"})
                async with session.post(call, data=body) as response:
                    assert response.status == 401
                auth = {"Authorization": f"Bearer {TOKEN}"}
                async with session.post(call, data=body, headers=auth) as response:
                    assert response.status == 202
                    assert set(await response.json()) == {"slug", "thread"}
                hook, headers = signed(HOOK_SECRET, "push", "d-1", {
                    "ref": "refs/heads/main", "repository": {"full_name": "acme/web"},
                })  # fmt: skip
                async with session.post(
                    f"{health}/github/webhook", data=hook, headers=headers
                ) as response:
                    assert response.status == 202

            def answered(name: str) -> bool | None:
                for opening in openings(slack, name):
                    thread = slack.thread("C0ROUTINE", str(opening["ts"]))
                    return any("Done: " in message_text(m) for m in thread) or None
                return None

            for name in ("deploy-check", "on-push"):
                await slack.wait_for(functools.partial(answered, name), WAIT)
                assert len(openings(slack, name)) == 1
            assert await bot.stop() == 0
