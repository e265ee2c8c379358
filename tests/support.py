"""Small helpers shared by the suites."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness.agents.orchestrator import Orchestrator
from harness.agents.questions import Answer, CloseReason, Question, answer_for
from harness.runtime.spec import Approval, RunIO, ToolReply, ToolUse
from harness.tasks.model import Task

# A line of ``python -X importtime``'s report: the module imported is its last field.
IMPORT_LINE = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)\s*$")


def harness_imports(
    *args: str, cwd: Path | None = None
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """``harness ARGS`` run as a user runs it (in ``cwd``, no ``HARNESS_*`` variable), and
    every module it imported."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "harness", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")},
        check=False,
    )
    modules = {m[1] for line in done.stderr.splitlines() if (m := IMPORT_LINE.match(line))}
    return done, modules


async def latest_task(orchestrator: Orchestrator) -> Task:
    """The newest task, in full."""
    summaries = await orchestrator.tasks.task_summaries()
    assert summaries, "no task was created"
    return await orchestrator.tasks.task(summaries[0].slug)


def git(folder: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def make_repository(folder: Path, files: dict[str, str] | None = None) -> Path:
    """A git repository on branch main with one commit holding ``files``."""
    folder.mkdir()
    git(folder, "init", "-q", "-b", "main")
    git(folder, "config", "user.email", "dev@example.com")
    git(folder, "config", "user.name", "Dev")
    for name, text in (files or {"README.md": "readme\n"}).items():
        (folder / name).write_text(text, encoding="utf-8")
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", "start")
    return folder


class AnsweringHumans:
    """A human channel that answers every question at once, as U42: with ``reply`` (a button's
    text or a thread reply), or by default with the question's last option. Approvals count
    only in tasks U42 asked for (``requested_by="U42"``)."""

    def __init__(self, answer: Callable[[str, Answer], bool], reply: str | None = None) -> None:
        self.answer = answer
        self.reply = reply
        self.asked: list[Question] = []

    def reaches(self, task: Any) -> bool:
        return True

    async def deliver(self, question: Question, task: Any) -> None:
        self.asked.append(question)
        last = question.options[-1] if question.options else "go ahead"
        answer = answer_for(question, self.reply or last, "U42")
        assert answer is not None, f"{self.reply!r} decides no approval"
        self.answer(question.question_id, answer)

    async def settle(self, question: Question, answer: Answer | None, why: CloseReason) -> None:
        return None


class AllowingTools:
    """A tool gateway that allows everything and answers each call with the caller's id."""

    async def call(self, agent_id: str, tool: str, args: Mapping[str, Any]) -> ToolReply:
        return ToolReply({"agent": agent_id})

    async def approve(self, agent_id: str, tool: str, args: Mapping[str, Any]) -> Approval:
        return Approval(True)


async def _ignored(_use: ToolUse) -> None:
    return None


def allowing_io() -> RunIO:
    """What a host run needs around it, for tests of hosts and runtimes: every call allowed
    (``AllowingTools``), nothing kept of the messages."""
    return RunIO(AllowingTools(), lambda _m: None, _ignored, lambda _cwd: None)


def add_repositories(
    project_dir: Path, repositories: Mapping[str, Path], *, default: str | None = None
) -> Path:
    """``project_dir``'s config.yaml, ``workspaces:`` naming these repositories (and the
    ``default`` one) added to it."""
    config = project_dir / "config.yaml"
    named = "".join(f"    {name}: {{path: {path}}}\n" for name, path in repositories.items())
    chosen = f"  default: {default}\n" if default is not None else ""
    text = config.read_text(encoding="utf-8")
    config.write_text(f"{text}\nworkspaces:\n{chosen}  repositories:\n{named}", encoding="utf-8")
    return config
