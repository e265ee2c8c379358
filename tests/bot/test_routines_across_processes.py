"""Routines in real ``harness bot`` processes whose clock the test sets (a file it writes):
a process stopped across a firing time runs the slot once when it is back, and a process
killed between claiming a firing and making its task starts it once at its next start. The
real CLI answers on the scripted model; Slack is the emulator."""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from harness.project import load_project
from harness.testing import spawn
from harness.testing.clock_file import set_time
from tests.bot.clocked_bots import (
    clocked_bot,
    routine_state,
    slot,
    this_minute,
    ticked,
    until,
)
from tests.bot.conftest import WAIT, bot_outside, finish_with_prompt, message_text
from tests.bot.routine_bots import openings
from tests.routine_support import EVERY_MINUTE, with_routines

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess, pytest.mark.waits]


@pytest.fixture
def config(project_dir: Path) -> Path:
    return with_routines(project_dir / "config.yaml", EVERY_MINUTE)


def routine_tasks(config: Path) -> list[dict[str, object]]:
    """The tasks the routine started, as their task.json holds them."""
    tasks_dir = load_project(config).config.tasks_dir
    found = [json.loads(f.read_text("utf-8")) for f in tasks_dir.glob("*/task.json")]
    return [t for t in found if (t.get("trigger") or {}).get("routine") == "every-minute"]


def answered(slack: object, opening: dict[str, object]) -> str | None:
    thread = slack.thread("C0ROUTINE", str(opening["ts"]))  # type: ignore[attr-defined]
    text = "\n".join(message_text(m) for m in thread)
    return text if "Done: Find the flakiest test and fix it." in text else None


async def test_a_bot_process_stopped_across_a_firing_time_runs_the_slot_once_when_back(
    config: Path, tmp_path: Path
) -> None:
    clock, minute = tmp_path / "clock", this_minute()
    due, due_text = slot(minute, 1)
    set_time(clock, minute + timedelta(seconds=30))
    async with bot_outside(finish_with_prompt) as (_model, slack, env):
        async with clocked_bot(config, slack, env, clock) as bot:
            await ticked(config, bot)
            assert openings(slack, "every-minute") == []
            assert await bot.stop() == 0

        set_time(clock, due + timedelta(seconds=30))  # down at the slot, back 30 s after
        async with clocked_bot(config, slack, env, clock) as bot:
            (opening,) = await slack.wait_for(lambda: openings(slack, "every-minute") or None, WAIT)
            assert f"at {due_text}" in opening["text"]  # the slot it was down at
            await slack.wait_for(lambda: answered(slack, opening), WAIT)
            await until(lambda: [r.status for r in routine_state(config, "every-minute").runs]
                        == ["completed"], "the run is recorded completed", bot)  # fmt: skip
            assert await bot.stop() == 0

        async with clocked_bot(config, slack, env, clock) as bot:  # and again: nothing new
            await ticked(config, bot)
            assert await bot.stop() == 0
    assert len(openings(slack, "every-minute")) == 1
    (task,) = routine_tasks(config)
    assert task["trigger"]["firing"] == f"schedule:{due_text}"  # type: ignore[index]


async def test_a_bot_killed_between_claiming_a_firing_and_making_its_task_starts_it_once_back(
    config: Path, tmp_path: Path
) -> None:
    clock, minute, held = tmp_path / "clock", this_minute(), tmp_path / "held"
    due, due_text = slot(minute, 1)
    set_time(clock, minute + timedelta(seconds=30))
    async with bot_outside(finish_with_prompt) as (_model, slack, env):
        async with clocked_bot(config, slack, env, clock, "--hold-task-creation", str(held)) as bot:
            await ticked(config, bot)
            set_time(clock, due + timedelta(seconds=1))
            await until(held.exists, "the firing's task is being made", bot)
            await bot.kill()  # SIGKILL: claimed, its thread opened, no task made
        assert routine_tasks(config) == []
        (starting,) = routine_state(config, "every-minute").starting
        assert starting.firing.key == f"schedule:{due_text}"
        listed = spawn.run(
            [sys.executable, "-m", "harness", "--config", str(config), "routines", "--json"],
            capture_output=True, text=True, timeout=WAIT, check=True,
        )  # fmt: skip
        (routine,) = json.loads(listed.stdout)
        assert routine["starting"] == [
            {"firing": f"schedule:{due_text}", "kind": "schedule", "at": due_text}
        ]

        async with clocked_bot(config, slack, env, clock) as bot:
            await slack.wait_for(lambda: len(openings(slack, "every-minute")) == 2 or None, WAIT)
            opening = openings(slack, "every-minute")[-1]
            assert f"at {due_text}" in opening["text"]
            await slack.wait_for(lambda: answered(slack, opening), WAIT)
            await until(lambda: [r.status for r in routine_state(config, "every-minute").runs]
                        == ["completed"], "the run is recorded completed", bot)  # fmt: skip
            await ticked(config, bot)
            assert await bot.stop() == 0
    state = routine_state(config, "every-minute")
    assert state.starting == () and state.skipped == ()
    (task,) = routine_tasks(config)
    assert task["trigger"]["firing"] == f"schedule:{due_text}"  # type: ignore[index]
    assert len(openings(slack, "every-minute")) == 2  # the killed process's thread, and the run's
