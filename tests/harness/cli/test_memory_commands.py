"""``harness memory list|add|rm|edit`` as a user runs it: subprocesses over the project's
tasks folder, the same notes the bot gives its agents."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.memory.service import file_memory
from harness.memory.store import memory_folder
from harness.project import load_project
from harness.tasks.model import Task, ThreadRef
from harness.testing import spawn
from harness.testing.clock import FakeClock
from tests.harness.tasks.nats_fixtures import module_server
from tests.support import add_repositories, make_repository

pytestmark = [pytest.mark.subprocess, pytest.mark.git]


def harness(project_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return spawn.run(
        [sys.executable, "-m", "harness", "memory", *args,
         "--config", str(project_dir / "config.yaml")],
        capture_output=True, text=True, timeout=60, env={**os.environ}, check=False,
    )  # fmt: skip


@pytest.fixture
def project_dir(project_dir: Path, tmp_path: Path) -> Path:
    add_repositories(project_dir, {"web": make_repository(tmp_path / "web")})
    return project_dir


def test_notes_added_in_the_terminal_are_listed_edited_and_removed(project_dir: Path) -> None:
    added = harness(project_dir, "add", "channel:C0123", "use", "pnpm,", "never npm", "--json")
    assert added.returncode == 0, added.stderr
    note = json.loads(added.stdout)["added"]
    assert (note["text"], note["scope"], note["source"]) == (
        "use pnpm, never npm",
        "channel:C0123",
        "person",
    )
    assert harness(project_dir, "add", "repo:web", "tests: make check").returncode == 0

    listed = harness(project_dir, "list")
    assert listed.returncode == 0
    assert "channel C0123: 1 note(s)" in listed.stdout
    assert "repository web: 1 note(s)" in listed.stdout
    assert f"{note['id']}  use pnpm, never npm" in listed.stdout

    edited = harness(project_dir, "edit", note["id"], "use", "pnpm", "9")
    assert edited.returncode == 0 and "edited" in edited.stdout
    removed = harness(project_dir, "rm", note["id"])
    assert removed.returncode == 0 and "removed" in removed.stdout
    left = json.loads(harness(project_dir, "list", "--json").stdout)
    assert left["channel:C0123"] == [] and left["repository:web"][0]["text"] == "tests: make check"


def test_what_the_terminal_keeps_is_what_the_agents_of_that_channel_get(
    project_dir: Path,
) -> None:
    assert harness(project_dir, "add", "channel:C1", "deploys: never on Fridays").returncode == 0

    config = load_project(project_dir / "config.yaml").config
    memory = file_memory(config.tasks_dir, FakeClock())
    ours = Task("t", "now", thread=ThreadRef("C1", "1.0"), repository="web")
    theirs = Task("u", "now", thread=ThreadRef("C2", "1.0"), repository="web")
    assert [n.text for n in asyncio.run(memory.for_task(ours))] == ["deploys: never on Fridays"]
    assert asyncio.run(memory.for_task(theirs)) == ()


def test_bad_input_is_a_clear_error_and_changes_nothing(project_dir: Path) -> None:
    cases = [
        (("add", "repo:nowhere", "x"), "no repository 'nowhere'"),
        (("add", "team:C1", "x"), "is not a scope"),
        (("add", "channel:C1"), "harness memory add channel:<id>|repo:<name> TEXT"),
        (("add", "channel:C1", "x" * 501), "at most 500"),
        (("rm", "n00000000"), "no note 'n00000000'"),
        (("edit", "n00000000"), "harness memory edit NOTE_ID TEXT"),
    ]
    for args, said in cases:
        failed = harness(project_dir, *args)
        assert failed.returncode != 0, args
        assert said in failed.stderr, (args, failed.stderr)
        assert "Traceback" not in failed.stderr
    assert "No notes yet" in harness(project_dir, "list").stdout


server = module_server()


@pytest.mark.nats
def test_with_a_nats_store_the_terminal_keeps_the_notes_on_the_server(
    project_dir: Path, nats_url: str
) -> None:
    config_file = project_dir / "config.yaml"
    config_file.write_text(
        config_file.read_text(encoding="utf-8")
        + f"\nstore: {{kind: nats, url: '{nats_url}', prefix: clinotes}}\n",
        encoding="utf-8",
    )
    added = harness(project_dir, "add", "repo:web", "tests: make check", "--json")
    assert added.returncode == 0, added.stderr
    listed = json.loads(harness(project_dir, "list", "--json").stdout)

    assert [n["text"] for n in listed["repository:web"]] == ["tests: make check"]
    config = load_project(config_file).config
    assert not memory_folder(config.tasks_dir).exists()
