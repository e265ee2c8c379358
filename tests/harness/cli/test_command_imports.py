"""What a command loads to start, as a user runs it (``python -X importtime -m harness ...``):
``harness --help`` and ``--version`` print without the agents' stack or config.yaml's schema,
and ``harness tasks`` lists without the orchestrator, the runtime or any network client, while
showing what the task desk would (a final record still pending in the spool included)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from pathlib import Path

import pytest

from harness.agents.pending_finals import PendingFinals
from harness.tasks.common import PENDING_FOLDER
from harness.tasks.model import AgentResult, DispatchRecord, Task
from harness.tasks.store import FileTaskStore
from harness.testing.records import make_record
from tests.support import harness_imports

pytestmark = pytest.mark.subprocess

# What printing the help or the version must not wait on.
NOT_FOR_HELP = (
    "aiohttp",
    "nats",
    "slack_sdk",
    "slack_bolt",
    "claude_agent_sdk",
    "mcp",
    "pydantic",
    "harness.config",
    "harness.agents",
    "harness.forge",
    "harness.runtime",
    "harness.tasks",
    # Its import (email, zipfile, csv) alone was a third of the help's start; the plug-ins'
    # commands and the version are read from the installed metadata without it.
    "importlib.metadata",
    # A few ms: the servers' parsers name their log level as a number instead.
    "logging",
)
# What printing the version needs no more than: no parser is built, no plug-in looked up.
NOT_FOR_VERSION = (*NOT_FOR_HELP, "harness.cli.parser", "bot", "harness.mcp_server")
# What listing tasks must not wait on: it runs no agent and calls no one.
NOT_FOR_TASKS = (
    "aiohttp",
    "nats",
    "slack_sdk",
    "slack_bolt",
    "claude_agent_sdk",
    "mcp",
    "harness.agents.orchestrator",
    "harness.forge",
    "harness.runtime",
    "harness.sandbox",
    "harness.workspaces",
    "harness.opening",
)
# What showing a task (the harness opened to read) must not wait on: it runs no agent,
# calls no one and opens no linked account's token.
NOT_FOR_READING = (
    "aiohttp", "nats", "slack_sdk", "slack_bolt", "claude_agent_sdk", "mcp", "cryptography",
)  # fmt: skip


def loaded(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules for p in packages if m == p or m.startswith(p + "."))


def test_help_and_version_print_without_the_agents_stack_or_the_config_schema() -> None:
    for args, says, unloaded in (
        (("--help",), "usage: harness", NOT_FOR_HELP),
        (("--version",), "harness ", NOT_FOR_VERSION),
    ):
        done, modules = harness_imports(*args)

        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.startswith(says), done.stdout
        assert "harness.cli.main" in modules  # the measurement saw the harness load
        assert loaded(modules, unloaded) == [], args
    assert "    bot " in harness_imports("--help")[0].stdout  # the plug-ins' commands are listed


def test_tasks_lists_without_the_orchestrator_runtime_or_network_clients(
    project_dir: Path,
) -> None:
    asyncio.run(_task_with_a_pending_final(project_dir / ".agents" / "tasks"))

    done, modules = harness_imports("tasks", "--config", str(project_dir / "config.yaml"))

    assert done.returncode == 0, done.stderr[-2000:]
    assert re.search(r"^fix-the-footer\s", done.stdout, re.MULTILINE), done.stdout
    assert "harness.tasks.index" in modules
    assert loaded(modules, NOT_FOR_TASKS) == []


def test_show_reads_a_task_without_the_runtime_network_clients_or_account_keys(
    project_dir: Path,
) -> None:
    asyncio.run(_task_with_a_pending_final(project_dir / ".agents" / "tasks"))

    done, modules = harness_imports("show", "fix-the-footer", cwd=project_dir)

    assert done.returncode == 0, done.stderr[-2000:]
    assert "fix the footer" in done.stdout and "did it" in done.stdout  # the spooled result
    assert "harness.agents.orchestrator" in modules  # the harness was opened
    assert loaded(modules, NOT_FOR_READING) == []


def test_a_listing_with_config_remembered_and_nothing_spooled_loads_no_pydantic_or_event_loop(
    project_dir: Path,
) -> None:
    async def one_task() -> None:
        store = FileTaskStore(project_dir / ".agents" / "tasks")
        try:
            await store.create("fix the footer")
        finally:
            await store.close()

    asyncio.run(one_task())
    config = str(project_dir / "config.yaml")
    harness_imports("tasks", "--config", config)  # config.yaml read in full, and remembered

    done, modules = harness_imports("tasks", "--config", config)

    assert done.returncode == 0, done.stderr[-2000:]
    assert re.search(r"^fix-the-footer\s", done.stdout, re.MULTILINE), done.stdout
    # pydantic is a tenth of a CPU-second: it reads task.json and spooled records, neither
    # of which a listing from the index needs; asyncio (with ssl) and the store's writers
    # another sixth of the command, for a read that waits on nothing.
    unloaded = ("pydantic", "harness.serialise", "asyncio", "aiofiles", "harness.tasks.files")
    assert loaded(modules, unloaded) == []
    done, _ = harness_imports("tasks", "--json", "--config", config)
    assert [task["slug"] for task in json.loads(done.stdout)["tasks"]] == ["fix-the-footer"]


def test_tasks_shows_a_final_record_still_pending_in_the_spool(project_dir: Path) -> None:
    # config.yaml remembered first: a remembered listing reads the spool too.
    assert harness_imports("tasks", cwd=project_dir)[0].returncode == 0
    asyncio.run(_task_with_a_pending_final(project_dir / ".agents" / "tasks"))

    done, _ = harness_imports("tasks", "--json", cwd=project_dir)

    assert done.returncode == 0, done.stderr
    (listed,) = json.loads(done.stdout)["tasks"]
    # The store still says running; the spool says how it ended, and the listing says so.
    assert (listed["slug"], listed["status"], listed["costUsd"]) == (
        "fix-the-footer",
        "completed",
        0.25,
    )


class _Refusing:
    """The store refusing ``save_dispatch``, as an unwritable task folder does: the final
    record goes to the spool."""

    def __init__(self, store: FileTaskStore) -> None:
        self._store = store

    async def save_dispatch(self, slug: str, record: DispatchRecord) -> Task:
        raise PermissionError(13, "Operation not permitted", f"{slug}/task.json")

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)


async def _task_with_a_pending_final(tasks_dir: Path) -> None:
    """A task whose running dispatch ended while its folder refused the final record (a
    process that stopped with it spooled)."""
    store = FileTaskStore(tasks_dir)
    try:
        task = await store.create("fix the footer")
        running = make_record("a1", run_id="ab" * 8)
        await store.save_dispatch(task.slug, running)
        final = dataclasses.replace(
            running,
            status="completed",
            completed_at="2026-01-01T10:05:00Z",
            result=AgentResult("did it"),
            cost_usd=0.25,
        )
        left = PendingFinals(tasks_dir / PENDING_FOLDER, _Refusing(store))  # type: ignore[arg-type]
        await left.keep(task.slug, final)
        await left.close()
        assert (await store.record("a1")).status == "running"
    finally:
        await store.close()
