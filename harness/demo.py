"""The terminal demo: a task planned by one agent, then a follow-up agent that builds on it.

Without ANTHROPIC_API_KEY the agents talk to the scripted model on loopback, so this runs
offline; with a key they use the real API. Run: ``make demo-cli`` or ``python -m harness.demo``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from harness.events import AgentEvent
from harness.project import build_orchestrator, load_project
from harness.render import render_record
from harness.scaffold import config_for_demo
from harness.testing.scripted_model import ScriptedModel, demo_script

REQUEST = "plan: a settings page where users change their display name and email"
FOLLOW_UP = "review the plan and the developer's change for missing validation"


@contextlib.contextmanager
def model_environment() -> Iterator[str]:
    """The real API when a key is set, else the scripted model (its env applied to ours)."""
    if os.environ.get("ANTHROPIC_API_KEY"):
        yield "the Anthropic API (ANTHROPIC_API_KEY is set)"
        return
    with ScriptedModel.in_thread(demo_script) as model:
        saved = {k: os.environ.get(k) for k in model.env()}
        os.environ.update(model.env())
        try:
            yield f"the scripted model at {model.base_url} (no ANTHROPIC_API_KEY)"
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


async def run(config: Path) -> int:
    orchestrator = build_orchestrator(load_project(config))
    await orchestrator.recover_interrupted()
    orchestrator.subscribe(on_event)
    try:
        role = orchestrator.route(REQUEST)
        say(f'1. You ask: "{REQUEST}"  -> routed to {role}')
        handle = await orchestrator.draft(role, REQUEST)
        first = await orchestrator.wait(handle.agent_id)
        slug = handle.task_slug
        say()
        say(render_record(first, task_slug=slug))
        if first.status != "completed":
            return 1

        task = await orchestrator.task(slug)
        role = orchestrator.route_follow_up(task, FOLLOW_UP)
        say()
        say(f'2. Follow-up on task {slug}: "{FOLLOW_UP}"  -> routed to {role}')
        context = await orchestrator.task_context(slug)
        say("   It sees the task's history first:")
        for line in context.splitlines()[:12]:
            say(f"   | {line}")
        second = await orchestrator.run(role, FOLLOW_UP, task_slug=slug)
        say()
        say(render_record(second, task_slug=slug))
        say()
        say(f"See it all with: harness show {slug}   (and `harness tasks`)")
        return 0 if second.status == "completed" else 1
    finally:
        await orchestrator.shutdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=None, help="path to config.yaml")
    args = parser.parse_args()
    with model_environment() as where:
        say(f"harness demo, agents talk to {where}")
        say()
        return asyncio.run(run(config_for_demo(args.config)))


if __name__ == "__main__":
    sys.exit(main())
