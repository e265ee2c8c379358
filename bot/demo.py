"""``make demo``: the whole product on local defaults.

Without Slack tokens the real bot (HTTP mode, signed requests) runs against our Slack
emulator on loopback; without ANTHROPIC_API_KEY its agents, the real Claude Code CLI, talk to
the scripted model (``demo_script``). A simulated person DMs the bot "plan: …" and the
terminal shows the thread unfold: the analyst, the developer it drafts, their results. Exits
0 once the analyst's result is posted, 1 on a failure or after ``--timeout`` seconds.

With SLACK_BOT_TOKEN set there is nothing to simulate: it runs the real bot (`harness bot`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from bot.app import create_app
from bot.server import BotServer, serve
from bot.settings import BotOptions, SlackEnv, choose_mode
from bot.testing.slack_emulator import ApiCall, SlackEmulator, transcript_line
from harness.errors import HarnessError
from harness.project import Project, build_orchestrator, default_config_path, load_project
from harness.runtime import ClaudeRuntime
from harness.testing.scripted_model import ScriptedModel, demo_script

DEFAULT_REQUEST = "plan: a settings page with a dark mode toggle"
USER, CHANNEL = "UDEMO", "DDEMO"


def _print(line: str) -> None:
    print(line, flush=True)


def _show(call: ApiCall) -> None:
    line = transcript_line(call, width=160)
    if line:
        _print(line)


@contextlib.asynccontextmanager
async def _runtime() -> AsyncIterator[ClaudeRuntime]:
    if os.environ.get("ANTHROPIC_API_KEY"):
        _print("demo: agents use the model API from ANTHROPIC_API_KEY")
        yield ClaudeRuntime()
        return
    async with ScriptedModel(demo_script) as model:
        _print(f"demo: no ANTHROPIC_API_KEY, agents talk to the scripted model at {model.base_url}")
        yield ClaudeRuntime(base_env=model.env())


async def run_demo(project: Project, request: str, timeout: float) -> int:
    async with _runtime() as runtime, SlackEmulator() as slack:
        slack.on_call(_show)
        orchestrator = build_orchestrator(project, runtime)
        env = SlackEnv(
            bot_token=slack.identity.bot_token,
            signing_secret=slack.identity.signing_secret,
            api_url=slack.api_url,
        )
        bot = create_app(orchestrator, env, options=BotOptions(status_interval=2.5))
        server = BotServer(bot, "http", host="127.0.0.1", port=0)
        await server.start()
        slack.bot_url = server.url
        _print(f"demo: Slack emulator at {slack.api_url}, bot at {server.url}")
        _print(f"demo: tasks in {project.config.tasks_dir}")
        try:
            sent = await slack.user_message(USER, CHANNEL, request)
            ts = sent.event["ts"]
            _print(f"#{CHANNEL} {ts} | {USER}: {request}")

            def ended() -> str | None:
                found = slack.reactions(CHANNEL, ts) & {"white_check_mark", "x"}
                return next(iter(found), None)

            try:
                outcome = await slack.wait_for(ended, timeout)
            except TimeoutError:
                _print(f"demo: no result within {timeout:g} s")
                return 1
            last = [m for m in slack.thread(CHANNEL, ts) if m.get("bot_id")][-1:]
            for message in last:  # the end of the thread, in full
                _print("\n".join(f"    {row}" for row in str(message.get("text")).splitlines()))
        finally:
            await server.stop("the demo ended")
    if outcome != "white_check_mark":
        _print("demo: the run failed; its thread says why")
        return 1
    _print("demo: done, the analyst's result is in the thread")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bot.demo", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument("--config", type=Path, default=None, help="config.yaml to use")
    parser.add_argument("--request", default=DEFAULT_REQUEST, help="what the person asks")
    parser.add_argument("--timeout", type=float, default=180.0, help="give up after (s)")
    parser.add_argument(
        "--keep-tasks",
        action="store_true",
        help="keep the tasks and their workspaces where config.yaml says (default: a "
        "temporary folder)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        project = load_project(args.config or default_config_path())
        env = SlackEnv.from_environ(os.environ)
        if env.bot_token:
            _print("demo: Slack tokens found, running the real bot (harness bot)")
            return asyncio.run(serve(project, env=env, mode=choose_mode(env, None)))
        if args.keep_tasks:
            return asyncio.run(run_demo(project, args.request, args.timeout))
        with tempfile.TemporaryDirectory(prefix="harness-demo-") as tmp:
            config = dataclasses.replace(
                project.config,
                tasks_dir=Path(tmp) / "tasks",
                workspaces=dataclasses.replace(
                    project.config.workspaces, root=Path(tmp) / "workspaces"
                ),
            )
            demo_project = Project(config=config, roles=project.roles)
            return asyncio.run(run_demo(demo_project, args.request, args.timeout))
    except HarnessError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
