"""A running bot for the tests: the real AsyncApp + AsyncWebClient against our Slack emulator
on loopback, with its agents run either by the real Claude Code CLI against a scripted model
(``rig(script)``) or by a runtime given to the rig (``rig(runtime=HeldRuntime())``: the fast
tier, for what does not need the CLI)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import re
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest

from bot.app import HarnessBot, create_app
from bot.server import BotServer
from bot.settings import BotOptions, Mode, SlackEnv
from bot.testing.slack_emulator import DeliveredEvent, SlackEmulator
from bot.testing.slack_model import message_text as message_text
from harness.agents.orchestrator import Orchestrator
from harness.config.settings import GitHubSettings, McpSettings, SlackSettings
from harness.project import Project, build_orchestrator
from harness.runtime.claude import ClaudeRuntime
from harness.runtime.spec import AgentRuntime
from harness.testing import spawn
from harness.testing.held_runtime import HeldRuntime
from harness.testing.scripted_model import ModelRequest, Script, ScriptedModel, Turn

BOT_TOKEN = "xoxb-bot-test"
APP_TOKEN = "xapp-bot-test"
SECRET = "bot-test-signing-secret"
JSON = dict[str, Any]
WAIT = 30.0  # bounded waits for agent runs (each ~0.6 s of CLI start on an idle machine)
FINAL = ("white_check_mark", "x")


def finish_with_prompt(request: ModelRequest) -> Turn:
    """Finishes at once, quoting the agent's assignment (the prompt's last line)."""
    return Turn.finish(f"Done: {request.first_user_text.strip().splitlines()[-1]}")


@dataclass
class Rig:
    slack: SlackEmulator
    bot: HarnessBot
    server: BotServer
    runtime: AgentRuntime
    scripted: ScriptedModel | None = None

    @property
    def orchestrator(self) -> Orchestrator:
        return self.bot.orchestrator

    @property
    def model(self) -> ScriptedModel:
        """The scripted model behind the CLI (a rig started with a script has one)."""
        if self.scripted is None:
            raise AssertionError("this rig runs no CLI: start it with rig(script)")
        return self.scripted

    @property
    def held(self) -> HeldRuntime:
        """The runtime holding the agents (a rig started with runtime=HeldRuntime())."""
        if not isinstance(self.runtime, HeldRuntime):
            raise AssertionError("this rig's agents are not held: use rig(runtime=HeldRuntime())")
        return self.runtime

    async def say(
        self, text: str, *, user: str = "U1", channel: str = "D1", thread_ts: str | None = None
    ) -> DeliveredEvent:
        return await self.slack.user_message(user, channel, text, thread_ts=thread_ts)

    async def final_reaction(self, channel: str, ts: str, timeout: float = WAIT) -> str:
        """Waits for the ✅ / ❌ the bot puts on a user's message when its run ends."""

        def done() -> str | None:
            found = self.slack.reactions(channel, ts) & set(FINAL)
            return next(iter(found), None)

        return await self.slack.wait_for(done, timeout)

    def bot_messages(self, channel: str, thread_ts: str) -> list[JSON]:
        return [m for m in self.slack.thread(channel, thread_ts) if m.get("bot_id")]

    def bot_text(self, channel: str, thread_ts: str) -> str:
        """Everything the bot shows in the thread: message texts and section texts."""
        return "\n".join(message_text(m) for m in self.bot_messages(channel, thread_ts))

    def runs(self) -> list[ModelRequest]:
        """The first request of each agent run (each run is one CLI session)."""
        first: dict[str, ModelRequest] = {}
        for request in self.model.main_requests:
            first.setdefault(session_of(request), request)
        return list(first.values())


def session_of(request: ModelRequest) -> str:
    headers = {k.lower(): v for k, v in request.headers.items()}
    return headers.get("x-claude-code-session-id", f"request-{request.index}")


class RigFactory(Protocol):
    def __call__(
        self,
        script: Script | None = None,
        *,
        runtime: AgentRuntime | None = None,
        mode: Mode = "http",
        slack_settings: SlackSettings | None = None,
        options: BotOptions | None = None,
        mcp: McpSettings | None = None,
        health_port: int | None = None,
        github: GitHubSettings | None = None,
        recover: bool = False,
    ) -> contextlib.AbstractAsyncContextManager[Rig]: ...


@pytest.fixture
async def slack() -> AsyncIterator[SlackEmulator]:
    async with SlackEmulator(
        signing_secret=SECRET, bot_token=BOT_TOKEN, app_token=APP_TOKEN
    ) as emulator:
        yield emulator


@pytest.fixture
def rig(project: Project, slack: SlackEmulator) -> RigFactory:
    """``async with rig(script) as r:`` a bot serving the emulator (HTTP or Socket Mode) whose
    agents run the real CLI against ``script``; ``rig(runtime=...)`` runs them on that runtime
    instead, and starts no CLI and no model. ``recover``: the dispatches a killed bot left
    running are marked interrupted first, as ``harness bot`` does at its start."""

    @contextlib.asynccontextmanager
    async def start(
        script: Script | None = None,
        *,
        runtime: AgentRuntime | None = None,
        mode: Mode = "http",
        slack_settings: SlackSettings | None = None,
        options: BotOptions | None = None,
        mcp: McpSettings | None = None,
        health_port: int | None = None,
        github: GitHubSettings | None = None,
        recover: bool = False,
    ) -> AsyncIterator[Rig]:
        if (script is None) == (runtime is None):
            raise TypeError("rig() takes a script (for the real CLI) or a runtime, not both")
        config = project.config
        if slack_settings is not None:
            config = dataclasses.replace(config, slack=slack_settings)
        if mcp is not None:
            config = dataclasses.replace(config, mcp=mcp)
        if github is not None:
            config = dataclasses.replace(config, github=github)
        async with contextlib.AsyncExitStack() as stack:
            model = None
            if script is not None:
                model = await stack.enter_async_context(ScriptedModel(script))
                runtime = ClaudeRuntime(base_env=model.env())
            assert runtime is not None
            orchestrator = build_orchestrator(Project(config=config, roles=project.roles), runtime)
            env = SlackEnv(
                bot_token=BOT_TOKEN,
                app_token=APP_TOKEN if mode == "socket" else None,
                signing_secret=SECRET,
                api_url=slack.api_url,
            )
            # Edited status messages unless a test asks for streamed replies.
            options = options or BotOptions(status_interval=0.5, stream_replies=False)
            bot = create_app(orchestrator, env, options=options)
            if recover:  # as `harness bot` starts: what a killed one left is marked first
                bot.interrupted = await orchestrator.recover_interrupted()
            server = BotServer(bot, mode, app_token=env.app_token, host="127.0.0.1", port=0,
                               health_port=health_port)  # fmt: skip
            await server.start()
            stack.push_async_callback(server.stop)
            if mode == "http":
                slack.bot_url, slack.delivery = server.url, "http"
            else:
                slack.delivery = "socket"
            yield Rig(slack, bot, server, runtime, model)

    return start


def texts(messages: Sequence[JSON]) -> list[str]:
    return [message_text(m) for m in messages]


def calls_with(slack: SlackEmulator, method: str, needle: str) -> Callable[[], list[Any]]:
    def find() -> list[Any]:
        return [c for c in slack.calls(method) if needle in str(c.params)]

    return find


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


SLACK_VARS = ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_API_URL")


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without its own Slack variables or model key, and
    ``extra``: what a ``harness`` process started by a test gets."""
    env = {k: v for k, v in os.environ.items() if k not in SLACK_VARS}
    env.pop("ANTHROPIC_API_KEY", None)
    return {**env, **extra}


def bot_env(model: ScriptedModel, slack: SlackEmulator) -> dict[str, str]:
    """The environment of a ``harness bot`` process on ``slack`` and ``model``."""
    return {
        **clean_env(),
        **model.env(),
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": slack.api_url,
    }


@contextlib.asynccontextmanager
async def bot_outside(
    script: Script,
) -> AsyncIterator[tuple[ScriptedModel, SlackEmulator, dict[str, str]]]:
    """The scripted model, the Slack emulator signing its events, and the environment of the
    ``bot_process`` started on them."""
    async with (
        ScriptedModel(script) as model,
        SlackEmulator(signing_secret=SECRET, bot_token=BOT_TOKEN) as slack,
    ):
        yield model, slack, bot_env(model, slack)


@contextlib.asynccontextmanager
async def bot_process(
    config: Path, slack: SlackEmulator, env: Mapping[str, str], *args: str
) -> AsyncIterator[asyncio.subprocess.Process]:
    """``harness bot --mode http`` as people run it, serving ``slack`` once it listens;
    killed at the end if the test did not stop it."""
    # Port 0, the one it got read from its banner: a port picked here and freed could be
    # taken by another test's connection before the bot binds it.
    bot = await spawn.create_subprocess_exec(
        *(sys.executable, "-m", "harness", "bot", "--mode", "http", "--port", "0"),
        *("--config", str(config), *args),
        env=dict(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert bot.stderr is not None
    try:
        banner, said = b"", []
        while b"listening on" not in banner:
            banner = await asyncio.wait_for(bot.stderr.readline(), WAIT)
            said.append(banner.decode(errors="replace"))
            assert banner, "the bot exited before it listened:\n" + "".join(said[-30:])
        listening = re.search(rb"listening on (http://\S+/slack/events)", banner)
        assert listening is not None, banner
        slack.bot_url = listening.group(1).decode()
        yield bot
    finally:
        if bot.returncode is None:
            bot.kill()
            await bot.wait()
