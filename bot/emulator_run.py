"""``harness bot --emulator``: the real bot against the local Slack emulator, with a page in the
browser to use it as a person would, no Slack workspace needed.

The emulator (``bot.testing.slack_emulator``, the one the tests use) listens on loopback and
serves the page (``bot.emulator_page``); the bot runs in HTTP mode on another loopback port,
its requests signed as Slack signs them. Its agents, the real Claude Code CLI, talk to the
scripted model (offline, costs simulated) unless ``--real`` asks for the model the environment
names. It runs until Ctrl-C or SIGTERM, then stops its agents as ``harness bot`` does.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from bot.app import create_app
from bot.emulator_page import CHANNEL_NAME, EmulatorPage
from bot.server import BotServer
from bot.settings import BotOptions, SlackEnv
from bot.testing.slack_emulator import SlackEmulator
from harness.cli.offline import exported_keys
from harness.errors import HarnessError
from harness.opening import Harness, open_harness
from harness.project import Project
from harness.runtime.model_access import require_model_access
from harness.stop_signals import StopSignals

READY = "harness bot --emulator: open"


def _say(line: str) -> None:
    print(f"harness bot --emulator: {line}", file=sys.stderr, flush=True)


def _open(project: Project, real: bool) -> contextlib.AbstractAsyncContextManager[Harness]:
    """The harness on the scripted model, or with ``real`` on the model the environment
    names (refused with what to set when none)."""
    if real:
        require_model_access(os.environ, Path.home())
        _say("--real: agents use the real model (it costs money)")
        return open_harness(project, purpose="serve")
    unused = exported_keys(os.environ)
    if unused:
        _say(f"{', '.join(unused)} set but not used: agents talk to the scripted model "
             "(--real uses them)")  # fmt: skip
    return open_harness(project, purpose="serve", scripted=True)


async def run_emulator(project: Project, *, port: int, real: bool) -> int:
    """Serves the page at http://127.0.0.1:PORT/ until SIGINT or SIGTERM; 0 after a clean
    stop."""
    with StopSignals().caught() as signals:
        async with _open(project, real) as harness:
            await harness.orchestrator.recover_interrupted()
            await _serve(harness, port, signals)
    _say("stopped")
    return 0


async def _serve(harness: Harness, port: int, signals: StopSignals) -> None:
    orchestrator = harness.orchestrator
    slack = SlackEmulator(port=port)
    # Stamped from now on: a thread an earlier run left in the task store (same channel, same
    # ts) would otherwise own this run's first message.
    slack.store.base_ts = max(slack.store.base_ts, int(orchestrator.clock.now().timestamp()))
    page = EmulatorPage(slack)
    slack.server.extra_routes.append(page.add_routes)
    try:
        await slack.start()
    except OSError as exc:
        await slack.stop()
        raise HarnessError(
            f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}",
            fix="pass another --port (0 picks a free one)",
        ) from None
    try:
        env = SlackEnv(
            bot_token=slack.identity.bot_token,
            signing_secret=slack.identity.signing_secret,
            api_url=slack.api_url,
        )
        bot = create_app(orchestrator, env, options=BotOptions())
        server = BotServer(bot, "http", host="127.0.0.1", port=0)
        await server.start()
        slack.bot_url = server.url
        try:
            where = "on this machine" if harness.where == "local" else f"on {harness.where}"
            _say(f"the bot (HTTP mode at {server.url}) talks to the Slack emulator at "
                 f"{slack.api_url}; agents run {where}")  # fmt: skip
            _say(f"tasks in {orchestrator.config.tasks_dir}")
            _say(f"DM the bot or mention @{slack.identity.bot_name} in #{CHANNEL_NAME}; "
                 "`/harness help` for the commands; Ctrl-C stops")  # fmt: skip
            print(f"{READY} {slack.base_url}/ in a browser", flush=True)
            await signals.stopped.wait()
            _say(f"{' and '.join(signals.received)} received, stopping agents…")
        finally:
            await server.stop("the emulated Slack bot was stopped")
    finally:
        await slack.stop()
