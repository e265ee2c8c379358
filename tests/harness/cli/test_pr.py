"""``harness pr SLUG``, run as a user runs it: a subprocess that pushes to a bare repository
and opens the pull request on a loopback GitHub started here; then ``show`` and ``tasks``."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.tasks.model import AgentResult
from harness.tasks.store import FileTaskStore
from harness.testing import spawn
from harness.testing.records import make_record
from tests.forge_support import FULL_NAME, Forge, commit_on_branch, forge
from tests.support import git

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]
__all__ = ["forge"]  # the fixture, used by name


async def harness(
    config: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``harness ARGS --config CONFIG`` in a thread: the fake GitHub it talks to is served
    by this test's event loop, which must go on running meanwhile."""
    return await asyncio.to_thread(
        spawn.run,
        [sys.executable, "-m", "harness", *args, "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env if env is not None else dict(os.environ),  # GITHUB_TOKEN: the forge's
        stdin=subprocess.DEVNULL,
        check=False,
    )


def configured(project_dir: Path, lines: str) -> Path:
    config = project_dir / "config.yaml"
    config.write_text(config.read_text(encoding="utf-8") + lines, encoding="utf-8")
    return config


async def worked_task(project_dir: Path, forge: Forge) -> str:
    """A task in `web` whose developer committed on its branch and reported, as stored by an
    earlier run; its slug."""
    store = FileTaskStore(project_dir / ".agents" / "tasks")
    try:
        task = await store.create("Add a settings page", repository="web", requester="U1")
        result = AgentResult("Added the settings page.", ("settings.html: the page",))
        await store.save_dispatch(task.slug, make_record("a1", status="completed", result=result))
    finally:
        await store.close()
    commit_on_branch(forge.repository, f"harness/{task.slug}", "settings.html", "<h1>Hi\n")
    return task.slug


async def test_pr_pushes_the_branch_opens_the_pull_request_and_show_and_tasks_list_it(
    project_dir: Path, forge: Forge
) -> None:
    config = configured(project_dir, forge.config())
    slug = await worked_task(project_dir, forge)

    opened = await harness(config, "pr", slug)

    assert opened.returncode == 0, opened.stderr
    branch = f"harness/{slug}"
    assert forge.remote_branch(branch) == git(forge.repository, "rev-parse", branch)
    [pull] = forge.github.pulls(FULL_NAME)
    assert (pull.head, pull.base, pull.user) == (branch, "main", "harness-bot")
    url = f"{forge.github.web_url}/{FULL_NAME}/pull/{pull.number}"
    assert f"Pull request #{pull.number}: {url}" in opened.stdout
    assert f"Branch: {branch} at " in opened.stdout
    assert "Opened as: harness-bot for U1" in opened.stdout

    again = await harness(config, "pr", slug, "--json")  # updates the same one
    assert again.returncode == 0, again.stderr
    document = json.loads(again.stdout)
    assert document["task"] == slug
    shown = document["pullRequest"]
    assert (shown["number"], shown["url"], shown["branch"]) == (pull.number, url, branch)
    assert shown["openedBy"] == "harness-bot" and len(forge.github.pulls(FULL_NAME)) == 1

    text = await harness(config, "show", slug)
    assert f"Pull request: #{pull.number} {url} ({branch} into main" in text.stdout
    as_json = json.loads((await harness(config, "show", slug, "--json")).stdout)
    assert as_json["task"]["pullRequest"]["url"] == url
    listing = await harness(config, "tasks")
    row = next(line for line in listing.stdout.splitlines() if line.startswith(slug))
    assert f"#{pull.number}" in row
    summaries = json.loads((await harness(config, "tasks", "--json")).stdout)["tasks"]
    assert summaries[0]["pullRequest"] == url


async def test_pr_without_a_forge_in_the_config_says_how_to_add_one(
    project_dir: Path, forge: Forge
) -> None:
    config = configured(
        project_dir,
        f"\nworkspaces:\n  default: web\n  repositories:\n    web:\n"
        f"      path: {forge.repository}\n",
    )
    slug = await worked_task(project_dir, forge)

    refused = await harness(config, "pr", slug)

    assert refused.returncode == 1
    assert "repository web has no forge to open pull requests on" in refused.stderr
    assert "fix: add `github: OWNER/NAME` under workspaces.repositories.web" in refused.stderr
    assert refused.stdout == ""
    assert forge.remote_branch(f"harness/{slug}") is None and forge.github.pulls(FULL_NAME) == []


async def test_pr_without_the_bots_token_names_the_variable_and_pushes_nothing(
    project_dir: Path, forge: Forge
) -> None:
    config = configured(project_dir, forge.config())
    slug = await worked_task(project_dir, forge)
    env = {name: value for name, value in os.environ.items() if name != "GITHUB_TOKEN"}

    refused = await harness(config, "pr", slug, env=env)

    assert refused.returncode == 1
    assert "no GitHub token for the bot: GITHUB_TOKEN is not set" in refused.stderr
    assert "fix: export GITHUB_TOKEN" in refused.stderr
    assert forge.remote_branch(f"harness/{slug}") is None and forge.github.pulls(FULL_NAME) == []


async def test_pr_of_an_unknown_task_is_a_usage_error(project_dir: Path, forge: Forge) -> None:
    config = configured(project_dir, forge.config())

    refused = await harness(config, "pr", "no-such-task")

    assert refused.returncode == 2
    assert "no task 'no-such-task'" in refused.stderr
    assert "fix: run `harness tasks`" in refused.stderr


async def test_pr_has_help(project_dir: Path, forge: Forge) -> None:
    shown = await harness(configured(project_dir, forge.config()), "pr", "--help")

    assert shown.returncode == 0
    said = " ".join(shown.stdout.split())
    assert "then open its pull request, or update the open one" in said
    assert "--json" in said and "Exits 1 when pushing or GitHub refused" in said
    listed = await harness(configured(project_dir, ""), "--help")
    assert "push a task's branch and open (or update) its pull request" in listed.stdout
