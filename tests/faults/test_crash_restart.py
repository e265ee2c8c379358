"""``harness bot --mode http`` killed with SIGKILL mid-agent and started again: the thread is
told what was interrupted and since when, the person who asked can run it again, and a
delivery Slack repeats after the restart is not run twice. Real processes, the real CLI
against the scripted model, the Slack emulator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.testing.slack_emulator import SlackEmulator
from harness.testing.scripted_model import ModelRequest, Turn
from tests.bot.conftest import (
    WAIT,
    bot_outside,
    bot_process,
    message_text,
    session_of,
)

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


class FirstRunStalls:
    """The first agent session stalls (the bot gets killed meanwhile); later ones finish."""

    def __init__(self) -> None:
        self.sessions: list[str] = []

    def __call__(self, request: ModelRequest) -> Turn:
        session = session_of(request)
        if session not in self.sessions:
            self.sessions.append(session)
        if session == self.sessions[0]:
            return Turn(text="working on it", stall_seconds=120)
        return Turn.finish(f"Done: {request.first_user_text.strip().splitlines()[-1]}")


def texts(slack: SlackEmulator, channel: str, ts: str) -> list[str]:
    return [message_text(m) for m in slack.thread(channel, ts) if m.get("bot_id")]


def notice_of(slack: SlackEmulator, channel: str, ts: str) -> dict[str, Any] | None:
    found = [m for m in slack.thread(channel, ts) if "was interrupted" in message_text(m)]
    return found[-1] if found else None


async def test_a_killed_bot_tells_the_thread_at_its_next_start_and_can_run_it_again(
    project_dir: Path,
) -> None:
    script = FirstRunStalls()
    config = project_dir / "config.yaml"
    async with bot_outside(script) as (model, slack, env):
        async with bot_process(config, slack, env) as bot:
            asked = await slack.user_message("U1", "D1", "fix it slowly")
            ts = asked.event["ts"]
            await slack.wait_for(lambda: slack.agent.streams("D1", ts) or None, WAIT)  # shown
            await model.wait_for_request(timeout=WAIT)
            bot.kill()
            await bot.wait()

        async with bot_process(config, slack, env):
            notice = await slack.wait_for(lambda: notice_of(slack, "D1", ts), WAIT)
            await slack.wait_for(lambda: "x" in slack.reactions("D1", ts) or None, WAIT)
            assert not [t for t in texts(slack, "D1", ts) if "is working…" in t]
            # Slack delivers the request again after the restart: it is not run twice.
            again = await slack.deliver_event(asked.event, retry_of=asked)
            assert again.acked
            [actions] = [b for b in notice["blocks"] if b["type"] == "actions"]
            button = actions["elements"][0]
            await slack.block_action(
                "U1", "D1", notice["ts"], button["action_id"], button["value"], thread_ts=ts
            )
            done = await slack.wait_for(
                lambda: [t for t in texts(slack, "D1", ts) if t.startswith("✅")] or None, WAIT * 2
            )

    assert "It had been working since" in message_text(notice)
    assert "Done: fix it slowly" in done[0]
    assert len(script.sessions) == 2  # the stalled run and the one run again, nothing more
