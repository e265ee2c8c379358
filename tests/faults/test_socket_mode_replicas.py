"""Two real ``harness bot`` replicas in Socket Mode (one connection each) on one config
(``runtime`` and ``store`` on one nats-server, agents on a real ``harness worker``), the
Slack emulator handing each event to one of the two connections in turn, as Slack spreads
an app's events over its connections: every DM is answered once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bot.conftest import finish_with_prompt
from tests.faults.nats_bot import nats_bot, replicas

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.nats, pytest.mark.waits]

ASKED = [f"tidy module {n}" for n in range(6)]


async def test_dms_spread_over_two_socket_mode_replicas_are_each_answered_once(
    project_dir: Path, tmp_path: Path
) -> None:
    async with (
        nats_bot(project_dir, tmp_path, finish_with_prompt, lost_after=30) as c,
        replicas(c, mode="socket") as r,
    ):
        a, b = r.bots
        assert c.slack.server.socket_connections == 2  # one connection each
        c.slack.server.socket_spread = True
        sent = [await c.slack.user_message("U1", "D1", text) for text in ASKED]
        for text, message in zip(ASKED, sent, strict=True):
            await c.until_said("D1", message.event["ts"], f"Done: {text}")
        spread = c.slack.server.envelopes_by_connection
        assert sorted(spread) == [1, 2] and min(spread.values()) >= len(ASKED) // 2
        assert await a.stop() == 0 and await b.stop() == 0
    for text, message in zip(ASKED, sent, strict=True):
        assert len(c.said("D1", message.event["ts"], f"Done: {text}")) == 1
    ran = [m.first_user_text.strip().splitlines()[-1] for m in c.model.main_requests]
    assert sorted(ran) == ASKED  # each DM's agent ran once, on one replica
