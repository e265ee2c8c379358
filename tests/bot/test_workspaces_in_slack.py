"""Two Slack threads on one git repository, as a team would use it: each thread's developer
works on its own branch, its checks run in the sandbox unasked, and the result names the
branch that holds the work; a repository gone between messages keeps the task's work. Real
Bolt app, real Claude Code CLI, real git."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from harness.project import Project, load_project
from harness.testing.scripted_model import ModelRequest, Turn
from tests.bot.conftest import WAIT, RigFactory
from tests.support import add_repositories, git, latest_task, make_repository

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

_CWD = re.compile(r"Primary working directory: (\S+)")


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    return make_repository(
        tmp_path / "web", {"check.sh": "grep -q done page.txt && echo 'checks pass'\n"}
    )


@pytest.fixture
def project(project_dir: Path, repository: Path) -> Project:
    config = add_repositories(project_dir, {"web": repository}, default="web")
    return load_project(config)


def developer(request: ModelRequest) -> Turn:
    """Writes page.txt, then runs the project's checks (a command no rule of its role allows:
    the sandbox lets it run)."""
    done = request.all_tool_results
    cwd = _CWD.search(request.system_text)
    assert cwd, "the CLI names the working directory"
    word = request.first_user_text.strip().splitlines()[-1].split()[-1]
    if not done:
        return Turn.call("Write", file_path=f"{cwd.group(1)}/page.txt", content=f"{word} done\n")
    if len(done) == 1:
        return Turn.call("Bash", command="sh check.sh")
    return Turn.finish(f"page says {word}", [f"checks: {done[-1].text.strip()}"])


async def test_each_thread_works_on_its_own_branch_and_its_checks_run_in_the_sandbox_unasked(
    rig: RigFactory, repository: Path
) -> None:
    async with rig(developer) as r:
        first = (await r.say("make the page blue", channel="D1")).event["ts"]
        assert await r.final_reaction("D1", first) == "white_check_mark"
        shown = r.bot_text("D1", first)
        assert "checks: checks pass" in shown
        assert "asks to run" not in shown  # inside the sandbox: nobody was asked
        [branch] = re.findall(r"\*Branch\* `(harness/[a-z0-9-]+)`", shown)
        assert "page.txt" in shown  # the diff stat
        assert "+blue done" in shown  # a short diff is shown in the result itself

        # A second thread: its own branch, and it does not see the first thread's page.
        second = (await r.say("make the page red", user="U2", channel="D2")).event["ts"]
        assert await r.final_reaction("D2", second) == "white_check_mark"
        [other] = re.findall(r"\*Branch\* `(harness/[a-z0-9-]+)`", r.bot_text("D2", second))
        assert other != branch

    # The branches hold the work; the repository's own checkout saw none of it.
    worktrees = {line.split()[-1].strip("[]"): line.split()[0] for line in
                 git(repository, "worktree", "list").splitlines()[1:]}  # fmt: skip
    blue = Path(worktrees[branch]) / "page.txt"
    red = Path(worktrees[other]) / "page.txt"
    assert blue.read_text() == "blue done\n" and red.read_text() == "red done\n"
    # Each agent's work is committed on its branch.
    assert git(repository, "show", f"{branch}:page.txt") == "blue done"
    assert git(repository, "show", f"{other}:page.txt") == "red done"
    assert git(repository, "log", "-1", "--format=%an|%s", branch).startswith("harness developer|")
    assert git(repository, "status", "--porcelain") == ""
    assert not (repository / "page.txt").exists()


def long_writer(request: ModelRequest) -> Turn:
    """Writes a 300-line file: a diff far too long for a Slack message."""
    cwd = _CWD.search(request.system_text)
    assert cwd, "the CLI names the working directory"
    if not request.all_tool_results:
        lines = "".join(f"line {n} of the generated table\n" for n in range(300))
        return Turn.call("Write", file_path=f"{cwd.group(1)}/table.txt", content=lines)
    return Turn.finish("wrote the table")


async def test_a_diff_too_long_for_a_message_is_uploaded_to_the_thread_as_a_file(
    rig: RigFactory,
) -> None:
    async with rig(long_writer) as r:
        asked = (await r.say("generate the table", channel="D1")).event["ts"]
        assert await r.final_reaction("D1", asked) == "white_check_mark"

        def shared() -> list[dict[str, Any]] | None:
            found = [m for m in r.bot_messages("D1", asked) if m.get("subtype") == "file_share"]
            return found or None

        [message] = await r.slack.wait_for(shared, WAIT)
        shown = r.bot_text("D1", asked)
        [file] = message["files"]
        content = r.slack.uploaded(file["id"]).decode("utf-8")

    assert "table.txt" in shown and "+300 -0" in shown  # the stat stays in the result
    assert "line 299 of the generated table" not in shown
    assert f"follows as the file `{file['name']}`" in shown
    assert file["name"].endswith(".diff") and "harness/" in file["title"]
    assert content.count("\n+line ") == 300 and "+line 299 of the generated table" in content


async def test_a_diff_slack_will_not_take_is_kept_and_the_thread_says_where(
    rig: RigFactory,
) -> None:
    async with rig(long_writer) as r:
        r.slack.faults.fail_next("files.completeUploadExternal", status=200, error="not_in_channel")
        asked = (await r.say("generate the table", channel="D1")).event["ts"]
        assert await r.final_reaction("D1", asked) == "white_check_mark"

        def told() -> str | None:
            shown = r.bot_text("D1", asked)
            return shown if "could not be attached" in shown else None

        shown = await r.slack.wait_for(told, WAIT)
        task = await latest_task(r.orchestrator)
        [record] = task.dispatches
        kept = await r.orchestrator.tasks.diff(task.slug, record)

    assert f"harness show {task.slug}" in shown
    assert kept is not None and "+line 299 of the generated table" in kept


async def test_a_repository_gone_between_messages_is_said_with_advice_that_keeps_the_work(
    rig: RigFactory, repository: Path
) -> None:
    async with rig(developer) as r:
        first = (await r.say("make the page blue", channel="D1")).event["ts"]
        assert await r.final_reaction("D1", first) == "white_check_mark"
        task = await latest_task(r.orchestrator)
        worktree = r.orchestrator.config.workspaces.root / task.slug
        (worktree / "notes.txt").write_text("uncommitted work\n", encoding="utf-8")
        moved = repository.with_name("web-moved")
        repository.rename(moved)

        again = await r.say("now make it green", channel="D1", thread_ts=first)
        assert await r.final_reaction("D1", again.event["ts"]) == "x"
        shown = r.bot_text("D1", first)
        assert "which the harness cannot find any more" in shown
        assert "put the repository back" in shown
        assert "delete" not in shown.split("cannot find any more")[1]
        assert (worktree / "notes.txt").read_text(encoding="utf-8") == "uncommitted work\n"
        assert (worktree / "page.txt").read_text(encoding="utf-8") == "blue done\n"

        moved.rename(repository)  # back where it was: the task goes on where it was
        last = await r.say("now make it red", channel="D1", thread_ts=first)
        assert await r.final_reaction("D1", last.event["ts"]) == "white_check_mark"
    assert git(repository, "show", f"harness/{task.slug}:page.txt") == "red done"
