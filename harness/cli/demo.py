"""The terminal demo: a task planned by one agent, then a follow-up agent that builds on it.

The agents talk to the scripted model on loopback, so this runs offline whatever is exported;
``--real`` (``make demo-cli REAL=1``) uses the model API the environment names. The tasks stay
where config.yaml puts them. Run: ``make demo-cli`` or ``python -m harness.cli.demo``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from harness.agents.events import AgentEvent
from harness.agents.orchestrator import Orchestrator
from harness.cli.offline import exported_keys, harness_command
from harness.cli.render import render_record
from harness.cli.scaffold import config_for_demo
from harness.errors import HarnessError
from harness.opening import open_harness
from harness.project import Project, load_project
from harness.runtime.model_access import model_access, scripted_env
from harness.testing.scripted_model import ScriptedModel, demo_script

REQUEST = "plan: a settings page where users change their display name and email"
FOLLOW_UP = "review the plan and the developer's change for missing validation"


@contextlib.contextmanager
def model_environment(real: bool) -> Iterator[str]:
    """With ``real``, the model API the environment names; else the scripted model (its env
    applied to ours, every other route to a model blanked)."""
    if real:
        access = model_access(os.environ, Path.home())
        if access is None:
            raise HarnessError(
                "--real, but nothing gives the agents a model: ANTHROPIC_API_KEY is not set "
                "and Claude Code is not logged in on this machine",
                fix="export ANTHROPIC_API_KEY=sk-ant-... (it costs money), or run the demo "
                "offline: make demo-cli",
            )
        yield f"the real model through {access} (--real: it costs money)"
        return
    with ScriptedModel.in_thread(demo_script) as model:
        env = scripted_env(model.env())
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            yield f"the scripted model at {model.base_url} (offline; costs are simulated)"
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def say(text: str = "") -> None:
    print(text, flush=True)


def on_event(event: AgentEvent) -> None:
    r = event.record
    by = f", drafted by {r.parent_id}" if r.parent_id else ""
    if event.kind == "started":
        say(f"  ▶ {r.role} agent {r.agent_id} started{by}")
    elif event.kind == "finished":
        say(f"  ■ {r.role} agent {r.agent_id} {r.status}")


async def run(config: Path, *, simulated: bool) -> int:
    project = load_project(config)
    async with open_harness(project, purpose="run", simulated_costs=simulated) as harness:
        return await _walk_through(harness.orchestrator, project, config, simulated=simulated)


async def _walk_through(
    orchestrator: Orchestrator, project: Project, config: Path, *, simulated: bool
) -> int:
    await orchestrator.recover_interrupted()
    orchestrator.subscribe(on_event)
    role = orchestrator.route(REQUEST)
    say(f'1. You ask: "{REQUEST}"  -> routed to {role}')
    handle = await orchestrator.draft(role, REQUEST)
    first = await orchestrator.wait(handle.agent_id)
    slug = handle.task_slug
    say()
    say(render_record(first, task_slug=slug))
    if first.status != "completed":
        return 1

    task = await orchestrator.tasks.task(slug)
    role = orchestrator.route_follow_up(task, FOLLOW_UP)
    say()
    say(f'2. Follow-up on task {slug}: "{FOLLOW_UP}"  -> routed to {role}')
    context = await orchestrator.tasks.task_context(slug)
    say("   It sees the task's history first:")
    for line in context.splitlines()[:12]:
        say(f"   | {line}")
    second = await orchestrator.run(role, FOLLOW_UP, task_slug=slug)
    say()
    say(render_record(second, task_slug=slug))
    say()
    say(f"The task is kept in {project.config.tasks_dir / slug}")
    harness = harness_command()
    if config.resolve() != Path("config.yaml").resolve():
        harness += f" --config {config}"
    say("Try next:")
    say(f"  {harness} show {slug}      # everything about the task")
    cost = "(simulated) cost" if simulated else "cost"
    say(f"  {harness} tasks            # every task, its status and {cost}")
    follow_up = f'run --scripted --task {slug} "review: the plan"'
    say(f"  {harness} {follow_up}   # any command, offline")
    return 0 if second.status == "completed" else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=None, help="path to config.yaml")
    parser.add_argument(
        "--real", action="store_true", help="use the model API the environment names"
    )
    args = parser.parse_args(argv)
    unused = exported_keys(os.environ)
    if unused and not args.real:
        say(f"demo: {', '.join(unused)} set but not used: the demo is offline "
            "(make demo-cli REAL=1 uses them)")  # fmt: skip
    try:
        with model_environment(args.real) as where:
            say(f"harness demo, agents talk to {where}")
            say()
            return asyncio.run(run(config_for_demo(args.config), simulated=not args.real))
    except HarnessError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
