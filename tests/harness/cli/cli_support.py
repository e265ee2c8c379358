"""What the tests of the ``harness`` command share: the scripted model's script, the command
run as a user runs it (with or without a way to reach a model), tasks stored as a run would."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.tasks.model import DispatchRecord
from harness.tasks.store import FileTaskStore
from harness.testing import spawn
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn, demo_script


def task_folders(project_dir: Path) -> list[Path]:
    """The tasks' folders (the store's own files start with a dot)."""
    tasks = project_dir / ".agents" / "tasks"
    return [p for p in tasks.iterdir() if not p.name.startswith(".")] if tasks.exists() else []


def script(request: ModelRequest) -> Turn:
    if "slow" in request.first_user_text:
        return Turn(stall_seconds=60)
    if "ask me" in request.first_user_text:
        if not request.tool_results:
            return Turn.call("mcp__harness__ask_human", question="Which database?")
        return Turn.finish("asked", issues=[request.tool_results[-1].text])
    if "push the work" in request.first_user_text:  # needs an approval
        if not request.all_tool_results:
            return Turn.call("Bash", command="git push -h")
        return Turn.finish("checked", issues=[request.all_tool_results[-1].text])
    if "an audit log" in request.first_user_text:
        return demo_script(request)  # the analyst drafts and awaits a developer
    if "## Task History" in request.first_user_text:
        return Turn.finish("Reviewed the plan", ["checked the steps"])
    return Turn.finish("Settings page planned", ["plan.md"], ["no design yet"], ["Which fields?"])


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel.in_thread(script) as served:
        yield served


def harness(
    project_dir: Path, model: ScriptedModel, *args: str
) -> subprocess.CompletedProcess[str]:
    return spawn.run(
        [sys.executable, "-m", "harness", *args, "--config", str(project_dir / "config.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **model.env()},
        check=False,
    )


def offline_env(home: Path) -> dict[str, str]:
    """This environment without any way to reach a model (keys, gateways, a login)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    return {**env, "HOME": str(home)}


def bare(
    cwd: Path, *args: str, env: dict[str, str] | None = None, stdin: int = subprocess.DEVNULL
) -> subprocess.CompletedProcess[str]:
    """``harness ARGS`` run in ``cwd``, its config found the default way, with no access to
    a model unless ``env`` gives one."""
    return spawn.run(
        [sys.executable, "-m", "harness", *args],
        cwd=cwd,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env=env if env is not None else offline_env(cwd),
        check=False,
    )


def stored_task(project_dir: Path, *records: DispatchRecord, created: str | None = None) -> str:
    """A task written by the store itself, as an earlier run would have; its slug."""

    async def create() -> str:
        store = FileTaskStore(project_dir / ".agents" / "tasks")
        try:
            slug = (await store.create("an earlier request")).slug
            for record in records:
                await store.save_dispatch(slug, record)
            return slug
        finally:
            await store.close()

    slug = asyncio.run(create())
    if created is not None:  # as if made long ago: a hand edit the store re-reads
        file = project_dir / ".agents" / "tasks" / slug / "task.json"
        data = json.loads(file.read_text("utf-8"))
        data["created"] = created
        file.write_text(json.dumps(data), "utf-8")
    return slug


def age_tree(folder: Path, days: float) -> None:
    """Make everything in ``folder`` look last modified ``days`` ago."""
    when = time.time() - days * 86_400
    for path in [*folder.rglob("*"), folder]:
        os.utime(path, (when, when), follow_symlinks=False)
