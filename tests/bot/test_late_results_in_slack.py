"""A result that comes in after its thread was told the agent was interrupted (its worker
was cut off from NATS for longer than ``lostAfterSeconds``) takes the interruption notice's
place: the thread shows the result and no *Run again* button for an agent that finished.
The real Bolt app on the emulator, a real nats-server, a ``harness worker`` process running
the real CLI against the scripted model, reaching NATS through a proxy cut and restored."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.blocks import RERUN_ACTION
from bot.settings import BotOptions
from tests.bot.conftest import WAIT, RigFactory, message_text
from tests.bot.cut_off import cut_off_rig
from tests.faults.nats_bot import HeldUntilReleased

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.nats]


def rerun_buttons(messages: list[dict[str, object]]) -> list[str]:
    """The agent ids the thread's *Run again* buttons would run again."""
    return [
        str(element.get("value"))
        for message in messages
        for block in message.get("blocks") or []  # type: ignore[attr-defined]
        for element in block.get("elements") or []
        if element.get("action_id") == RERUN_ACTION
    ]


@pytest.mark.parametrize("streaming", [False, True], ids=["edited", "streamed"])
async def test_a_late_result_leaves_no_run_again_button_for_the_agent_that_finished(
    rig: RigFactory, tmp_path: Path, streaming: bool
) -> None:
    held = HeldUntilReleased()

    options = BotOptions(status_interval=0.5, stream_replies=streaming)
    async with cut_off_rig(rig, tmp_path, held, options=options) as cut:
        r, model, proxy = cut.rig, cut.model, cut.proxy
        ts = (await r.say("fix it remotely")).event["ts"]
        await model.wait_for_request(timeout=WAIT)  # at work on the worker
        await proxy.cut()

        def said(needle: str) -> list[str] | None:
            texts = [message_text(m) for m in r.bot_messages("D1", ts)]
            return [t for t in texts if needle in t] or None

        await r.slack.wait_for(lambda: rerun_buttons(r.bot_messages("D1", ts)) or None, WAIT)
        held.release.set()  # the CLI finishes while its worker cannot say so
        await proxy.restore()
        await r.slack.wait_for(lambda: said("Done: fix it remotely"), WAIT)
        await r.slack.wait_for(lambda: said("finished after all"), WAIT)
        await r.bot.outbox.settled(WAIT)
        shown = r.bot_messages("D1", ts)
        reactions = r.slack.reactions("D1", ts)

    assert rerun_buttons(shown) == []
    # The interruption's ❌ went with its notice: the person's message says ✅.
    assert "white_check_mark" in reactions and "x" not in reactions
    assert not [m for m in shown if "was interrupted" in message_text(m)]
    assert len([m for m in shown if "Done: fix it remotely" in message_text(m)]) == 1


async def test_a_late_result_takes_the_place_of_an_interruption_notice_slack_had_not_taken(
    rig: RigFactory, tmp_path: Path
) -> None:
    held = HeldUntilReleased()

    def tried(needle: str) -> list[object]:
        return [c for c in r.slack.calls() if needle in str(c.params)]

    async with cut_off_rig(rig, tmp_path, held) as cut:
        r, model, proxy = cut.rig, cut.model, cut.proxy
        ts = (await r.say("fix it remotely")).event["ts"]
        await model.wait_for_request(timeout=WAIT)  # at work on the worker
        await r.slack.wait_for(lambda: r.bot_messages("D1", ts) or None, WAIT)  # its status
        # Slack refuses every edit from now on: the interruption notice stays in the outbox.
        r.slack.faults.fail_next("chat.update", times=100_000, status=500)
        await proxy.cut()
        await r.slack.wait_for(lambda: tried("was interrupted") or None, WAIT)
        held.release.set()  # the CLI finishes while its worker cannot say so
        await proxy.restore()
        await r.slack.wait_for(lambda: tried("finished after all") or None, WAIT)
        r.slack.faults.clear()
        await r.slack.wait_for(
            lambda: "white_check_mark" in r.slack.reactions("D1", ts) or None, WAIT
        )
        await r.bot.outbox.settled(WAIT)
        shown = r.bot_messages("D1", ts)
        reactions = r.slack.reactions("D1", ts)
        applied = [c for c in r.slack.calls() if c.status == 200 and c.response.get("ok")]

    # The notice never reached the thread: no ⏸️, no *Run again*, no ❌ at any moment.
    assert not [c for c in applied if RERUN_ACTION in str(c.params)]
    assert not [c for c in applied if "was interrupted" in str(c.params)]
    assert "x" not in reactions and "white_check_mark" in reactions
    assert rerun_buttons(shown) == []
    assert len([m for m in shown if "Done: fix it remotely" in message_text(m)]) == 1
    assert len([m for m in shown if "finished after all" in message_text(m)]) == 1
