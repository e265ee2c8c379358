"""``make demo``: the whole product on local defaults.

Without Slack tokens the real bot (HTTP mode, signed requests) runs against our Slack
emulator on loopback; without ANTHROPIC_API_KEY its agents, the real Claude Code CLI, talk to
the scripted model (``demo_script``). A simulated person DMs the bot "plan: …" and the
terminal shows the thread unfold: the analyst, the developer it drafts, their results. Exits
0 once the analyst's result is posted, 1 on a failure or after ``--timeout`` seconds.

With ``--cluster`` (``make demo-cluster``) the agents run elsewhere: a NATS server with
JetStream and two ``harness worker`` processes start on loopback, the bot sends its agents to
them (``harness.testing.cluster``), and the transcript says which worker ran each agent.

It is offline whatever is exported: Slack tokens and model keys are left unused (it says
so) unless ``--real`` (``make demo REAL=1``) asks for them: then a SLACK_BOT_TOKEN runs the
real bot (`harness bot`) and any model access (an API key, a login) the real model. The
tasks stay where config.yaml puts them and the transcript is written next to them; the last
lines say what to try next.
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
from typing import Any

from bot.app import create_app
from bot.server import BotServer, serve
from bot.settings import BotOptions, SlackEnv, check_token_shapes, choose_mode
from bot.testing.slack_emulator import ApiCall, SlackEmulator, transcript_line
from harness.agents.orchestrator import Orchestrator
from harness.atomic import write_atomic
from harness.cli.offline import exported_keys, harness_command
from harness.cli.scaffold import config_for_demo
from harness.errors import HarnessError
from harness.opening import Harness, open_harness
from harness.project import Project, load_project
from harness.runtime.model_access import model_access, scripted_env
from harness.tasks.model import Task
from harness.testing.cluster import local_cluster
from harness.testing.scripted_model import ScriptedModel, demo_script

DEFAULT_REQUEST = "plan: a settings page with a dark mode toggle"
USER, CHANNEL = "UDEMO", "DDEMO"


_transcript: list[str] = []
_shown_task: list[str] = []  # the slug of the task the demo made


def _print(line: str) -> None:
    _transcript.append(line)
    print(line, flush=True)


def _show(call: ApiCall) -> None:
    line = transcript_line(call, width=160)
    if line:
        _print(line)


def _real_model(real: bool) -> str | None:
    """With ``real``, what gives the agents the real model (None: nothing does, so they stay
    on the scripted one)."""
    return model_access(os.environ, Path.home()) if real else None


@contextlib.asynccontextmanager
async def _model_env(real: bool) -> AsyncIterator[dict[str, str]]:
    """What the agents' CLI needs to reach a model: the scripted one, or with ``real`` the
    model the environment names."""
    access = _real_model(real)
    if access:
        _print(f"demo: --real: agents use the real model through {access} (it costs money)")
        yield {}
        return
    async with ScriptedModel(demo_script) as model:
        _print(f"demo: agents talk to the scripted model at {model.base_url} (offline; its "
               "costs are simulated)")  # fmt: skip
        yield scripted_env(model.env())


@contextlib.asynccontextmanager
async def _harness(
    project: Project, cluster: bool, folder: Path, workspaces: Path, real: bool
) -> AsyncIterator[Harness]:
    """The harness the demo's bot serves: its agents here, or with ``cluster`` on two workers
    through a NATS server of its own; on the scripted model unless ``real``."""
    simulated = _real_model(real) is None
    async with _model_env(real) as model_env:
        if not cluster:
            here = open_harness(
                project, purpose="serve", model_env=model_env, simulated_costs=simulated
            )
            async with here as harness:
                yield harness
            return
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
        env.update(model_env)
        # One slot each: the analyst holds its worker's slot while it awaits the developer it
        # drafted, so the developer runs on the other worker (with two slots each, whichever
        # worker asked for work first took both, and the other stayed idle).
        async with local_cluster(folder, workspaces, env, slots=1, say=_said) as runtime:
            config = dataclasses.replace(project.config, runtime=runtime)
            on_cluster = open_harness(
                Project(config, project.roles), purpose="serve", simulated_costs=simulated
            )
            async with on_cluster as harness:
                yield harness


def _said(line: str) -> None:
    _print(f"demo: {line}")


async def run_demo(
    project: Project, request: str, timeout: float, *, cluster: bool = False, real: bool = False
) -> int:
    # NATS's data goes with the demo; the workers' workspaces stay, as the dispatches in the
    # task records point at them (a dot folder never passes for a task's workspace).
    workspaces = _workers_root(project)
    with tempfile.TemporaryDirectory(prefix="harness-cluster-") as tmp:
        async with _harness(project, cluster, Path(tmp), workspaces, real) as harness:
            return await _converse(project, harness.orchestrator, request, timeout)


async def _converse(
    project: Project, orchestrator: Orchestrator, request: str, timeout: float
) -> int:
    async with SlackEmulator() as slack:
        # Messages are stamped from now on, so each run's thread is a new one: a thread an
        # earlier run left in this folder's tasks (same channel, same ts) would own it.
        now = orchestrator.clock.now().timestamp()
        slack.store.base_ts = max(slack.store.base_ts, int(now))
        slack.on_call(_show)
        env = SlackEnv(
            bot_token=slack.identity.bot_token,
            signing_secret=slack.identity.signing_secret,
            api_url=slack.api_url,
        )
        options = BotOptions(status_interval=2.5)
        bot = create_app(orchestrator, env, options=options)
        server = BotServer(bot, "http", host="127.0.0.1", port=0)
        await server.start()
        slack.bot_url = server.url
        _print(f"demo: Slack emulator at {slack.api_url}, bot at {server.url}")
        _print(f"demo: tasks in {project.config.tasks_dir}")
        try:
            sent = await slack.user_message(USER, CHANNEL, request)
            ts = sent.event["ts"]
            _print(f"#{CHANNEL} {ts} | {USER}: {request}")

            placed: set[str] = set()

            def say_where() -> None:
                for agent in orchestrator.agents():
                    if agent.worker and agent.agent_id not in placed:
                        placed.add(agent.agent_id)
                        _print(f"demo: {agent.role} {agent.agent_id} runs on {agent.worker}")

            # At each of an agent's events, not only at Slack calls: a short agent may start
            # and end between two of them.
            orchestrator.subscribe(lambda _event: say_where())

            def ended() -> str | None:
                say_where()
                found = slack.reactions(CHANNEL, ts) & {"white_check_mark", "x"}
                return next(iter(found), None)

            try:
                outcome = await slack.wait_for(ended, timeout)
            except TimeoutError:
                _print(f"demo: no result within {timeout:g} s")
                return 1
            _shown_task.extend(t.slug for t in (await orchestrator.tasks.task_summaries())[:1])
            # An agent shorter than the gap between two events was not seen live: its record
            # says where it ran (a worker's folder holds its workspace).
            done = [await orchestrator.tasks.task(slug) for slug in _shown_task[-1:]]
            for role, agent_id, worker in _placements(done, _workers_root(project)):
                if agent_id not in placed:
                    _print(f"demo: {role} {agent_id} ran on {worker}")
            for text in _results(slack.thread(CHANNEL, ts)):  # each result, in full
                _print("\n".join(f"    {row}" for row in text.splitlines()))
        finally:
            await server.stop("the demo ended")
    if outcome != "white_check_mark":
        _print("demo: the run failed; its thread says why")
        return 1
    _print("demo: done, the analyst's result is in the thread")
    return 0


def _workers_root(project: Project) -> Path:
    """Where the cluster's workers keep their workspaces, one folder per worker."""
    return project.config.workspaces.root / ".demo-workers"


def _placements(tasks: Sequence[Task], workers: Path) -> list[tuple[str, str, str]]:
    """(role, agent id, worker) of each agent a worker of the cluster ran: its record keeps
    the folder the worker placed it in, under ``workers``/NAME."""
    found = []
    for record in (d for task in tasks for d in task.dispatches):
        with contextlib.suppress(ValueError, IndexError):
            worker = Path(record.cwd).relative_to(workers).parts[0]
            found.append((record.role, record.agent_id, worker))
    return found


def _results(thread: Sequence[dict[str, Any]]) -> list[str]:
    """The results the bot put in the thread (each the text of its sections)."""
    found = []
    for message in thread:
        sections = [b["text"]["text"] for b in message.get("blocks") or []
                    if b.get("type") == "section" and isinstance(b.get("text"), dict)]  # fmt: skip
        if message.get("bot_id") and sections and sections[0].startswith(("✅", "❌")):
            found.append("\n".join(sections))
    return found


def _cluster_command(config_option: str) -> str:
    """``make demo-cluster`` in this checkout (its Makefile is here), else the module itself."""
    makefile = Path("Makefile")
    if makefile.is_file() and "demo-cluster:" in makefile.read_text(errors="replace"):
        return "make demo-cluster"
    python = Path(sys.executable)
    with contextlib.suppress(ValueError):
        python = python.relative_to(Path.cwd())
    return f"{python} -m bot.demo --cluster{config_option}"


def _next_steps(config: Path, slug: str | None, *, simulated: bool) -> list[str]:
    harness = harness_command()
    config_option = ""
    if config.resolve() != Path("config.yaml").resolve():
        config_option = f" --config {config}"
    harness += config_option
    cost = "(simulated) cost" if simulated else "cost"
    show = f"{harness} show {slug}"
    shown = [f"  {show:<60} # the task: context, every dispatch, the results"] if slug else []
    return [
        "Try next:",
        *shown,
        f"  {harness + ' tasks':<60} # every task with its status and {cost}",
        f"  {_cluster_command(config_option):<60} # the same with the agents on two workers",
        f"  {harness + ' bot':<60} # the real bot: README, Running the Slack bot",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bot.demo", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument("--config", type=Path, default=None, help="config.yaml to use")
    parser.add_argument("--request", default=DEFAULT_REQUEST, help="what the person asks")
    parser.add_argument("--timeout", type=float, default=180.0, help="give up after (s)")
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="run the agents on two `harness worker` processes through a local NATS server",
    )
    parser.add_argument(
        "--real",
        action="store_true",
        help="use what the environment names: SLACK_BOT_TOKEN runs the real bot, "
        "ANTHROPIC_API_KEY the real model (default: offline, whatever is exported)",
    )
    parser.add_argument(
        "--temporary",
        action="store_true",
        help="keep the tasks and workspaces in a temporary folder removed at exit (default: "
        "where config.yaml says, next to the transcript)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        config_path = config_for_demo(args.config)
        project = load_project(config_path)
        env = SlackEnv.from_environ(os.environ)
        if args.real and env.bot_token:
            check_token_shapes(env)  # before any call to Slack, as `harness bot` does
            _print("demo: --real and Slack tokens found: running the real bot (harness bot)")
            return asyncio.run(serve(project, env=env, mode=choose_mode(env, None)))
        unused = exported_keys(os.environ)
        if unused and not args.real:
            _print(f"demo: {', '.join(unused)} set but not used: the demo is offline "
                   "(make demo REAL=1 uses them)")  # fmt: skip
        if args.temporary:
            with tempfile.TemporaryDirectory(prefix="harness-demo-") as tmp:
                config = dataclasses.replace(
                    project.config,
                    tasks_dir=Path(tmp) / "tasks",
                    workspaces=dataclasses.replace(
                        project.config.workspaces, root=Path(tmp) / "workspaces"
                    ),
                )
                return asyncio.run(run_demo(Project(config=config, roles=project.roles),
                                            args.request, args.timeout, cluster=args.cluster,
                                            real=args.real))  # fmt: skip
        code = asyncio.run(
            run_demo(project, args.request, args.timeout, cluster=args.cluster, real=args.real)
        )
        tasks_dir = project.config.tasks_dir
        transcript = tasks_dir.parent / "demo-transcript.txt"
        _print(f"demo: the transcript is in {transcript}, the tasks in {tasks_dir}")
        slug = _shown_task[-1] if _shown_task else None
        for line in _next_steps(config_path, slug, simulated=_real_model(args.real) is None):
            _print(line)
        write_atomic(transcript, ("\n".join(_transcript) + "\n").encode("utf-8"))
        return code
    except HarnessError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
