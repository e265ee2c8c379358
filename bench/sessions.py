"""Slack's agent sessions: how long a Stop click takes to end the work.

The real Bolt app (HTTP mode) against our Slack emulator on loopback, in this process; each
agent is the real Claude Code CLI against the scripted model, working (a model turn that
stalls) until it is stopped. Per run: a new DM thread, the agent started and its session
*processing*; then a user presses Stop (`agent_session_stopped`), and the clock runs until
both the agent's `claude` process is gone and Slack was told the session is no longer
processing. Aim: < 200 ms on loopback.

Usage: .venv/bin/python bench/sessions.py [--runs 10]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import copy_project, serve_bot

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bot.settings import BotOptions  # noqa: E402
from bot.testing.slack_emulator import SlackEmulator  # noqa: E402
from harness.project import build_orchestrator, load_project  # noqa: E402
from harness.runtime.claude import ClaudeRuntime  # noqa: E402
from harness.testing.processes import claude_children  # noqa: E402
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn  # noqa: E402

WAIT = 60.0


def working(request: ModelRequest) -> Turn:
    return Turn(text="Working on it.", stall_seconds=300)


def alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie waiting to be reaped has ended)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return text[text.rindex(")") + 2 :].split()[0] != "Z"


async def gone_at(pids: set[int]) -> float:
    """The time.time() at which every process of ``pids`` had ended (checked each ms)."""
    while any(alive(pid) for pid in pids):
        await asyncio.sleep(0.001)  # a process's end is not an event this loop hears of
    return time.time()


async def one_stop(slack: SlackEmulator, model: ScriptedModel, n: int) -> tuple[float, float]:
    """Seconds from the Stop click to the process gone, and to the session not processing."""
    channel = f"DS{n}"
    ts = (await slack.user_message(f"US{n}", channel, f"fix page {n} slowly")).event["ts"]
    await model.wait_for_request(
        lambda r: f"fix page {n} slowly" in r.first_user_text, timeout=WAIT
    )
    await slack.wait_for(lambda: slack.agent.session_status(channel, ts) == "processing", WAIT)
    children = claude_children()
    assert children, "no claude process to stop"
    told = len(slack.calls("agents.sessions.setStatus"))
    clicked = time.time()
    watch = asyncio.ensure_future(gone_at(children))
    await slack.agent.press_stop(f"US{n}", channel, ts)

    def left_processing() -> float | None:
        for call in slack.calls("agents.sessions.setStatus")[told:]:
            same = (call.params.get("channel_id"), call.params.get("thread_ts")) == (channel, ts)
            if same and call.params.get("status") != "processing":
                return call.time
        return None

    session_at = await slack.wait_for(left_processing, WAIT)
    process_at = await asyncio.wait_for(watch, WAIT)
    await slack.wait_for(lambda: "x" in slack.reactions(channel, ts), WAIT)
    return process_at - clicked, session_at - clicked


def line(name: str, samples: list[float]) -> str:
    ms = [s * 1000 for s in samples]
    return (
        f"{name:<44} median {statistics.median(ms):6.1f} ms  min {min(ms):6.1f}  "
        f"max {max(ms):6.1f}  (n={len(ms)})"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = copy_project(Path(tmp))
        # Only the agent Stop ends runs: no spare beside it (its CLI would stay).
        config.write_text(config.read_text(encoding="utf-8") + "\nspares: {}\n", encoding="utf-8")
        async with ScriptedModel(working) as model, SlackEmulator() as slack:
            orchestrator = build_orchestrator(
                load_project(config), ClaudeRuntime(base_env=model.env())
            )
            server = await serve_bot(slack, orchestrator, BotOptions())
            try:
                await one_stop(slack, model, 0)  # warm-up, not counted
                runs = [await one_stop(slack, model, n) for n in range(1, args.runs + 1)]
            finally:
                await server.stop()
    processes = [p for p, _ in runs]
    sessions = [s for _, s in runs]
    both = [max(p, s) for p, s in runs]
    print(line("Stop click -> claude process gone", processes))
    print(line("Stop click -> session no longer processing", sessions))
    print(line("Stop click -> both (aim < 200 ms)", both))


if __name__ == "__main__":
    asyncio.run(main())
