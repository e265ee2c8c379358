"""Files in a Slack request, end to end: the real Bolt app against the emulator, the real
Claude Code CLI in its sandbox against the scripted model, real git. The model is shown the
image; the agent reads the log's exact bytes in its folder; the task's branch holds the
agent's work and none of the attached files."""

from __future__ import annotations

import base64
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
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
LOG = "07:00:01 ERROR db: connection refused (ünïcode ✓)\n07:00:02 retry 1/3\n"


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    return make_repository(tmp_path / "web")


@pytest.fixture
def project(project_dir: Path, repository: Path) -> Project:
    config = add_repositories(project_dir, {"web": repository}, default="web")
    return load_project(config)


def images_in(request: ModelRequest) -> list[dict[str, Any]]:
    """The image blocks of the request's first user message."""
    first = next(m for m in request.messages if m.get("role") == "user")
    content = first.get("content")
    blocks = content if isinstance(content, list) else []
    return [b for b in blocks if isinstance(b, dict) and b.get("type") == "image"]


def developer(request: ModelRequest) -> Turn:
    """Reads the attached log where the prompt says it is, writes a note, and finishes
    quoting what it read."""
    done = request.all_tool_results
    cwd = _CWD.search(request.system_text)
    assert cwd, "the CLI names the working directory"
    if not done:
        [path] = re.findall(r"(\.attachments/app\.log) \(\d+ B\)", request.first_user_text)
        return Turn.call("Read", file_path=f"{cwd.group(1)}/{path}")
    if len(done) == 1:
        return Turn.call("Write", file_path=f"{cwd.group(1)}/notes.txt", content="db down\n")
    return Turn.finish("read the log", [done[0].text])


async def test_an_image_and_a_log_in_a_dm_reach_the_model_and_stay_off_the_branch(
    rig: RigFactory, repository: Path
) -> None:
    async with rig(developer) as r:
        image = r.slack.user_file("U1", "screen.png", PNG)
        log = r.slack.user_file("U1", "app.log", LOG.encode(), mimetype="text/plain")
        sent = await r.slack.user_message("U1", "D1", "why is it down?", files=[image, log])
        ts = sent.event["ts"]
        assert await r.final_reaction("D1", ts, WAIT) == "white_check_mark"

        [run] = r.runs()
        [shown] = images_in(run)
        assert shown["source"] == {
            "type": "base64",
            "media_type": "image/png",
            "data": base64.b64encode(PNG).decode(),
        }
        assert "why is it down?" in run.first_user_text
        assert "screen.png (70 B, shown to you above)" in run.first_user_text
        # The agent read the log's exact text with Read, in its sandbox.
        read = next(t for t in r.model.main_requests[-1].all_tool_results if t.tool_name == "Read")
        assert not read.is_error
        for line in LOG.splitlines():
            assert line in read.text
        assert "ERROR db: connection refused" in r.bot_text("D1", ts)

        task = await latest_task(r.orchestrator)
        worktree = Path(task.dispatches[-1].cwd)
        assert (worktree / ".attachments" / "app.log").read_bytes() == LOG.encode()
        assert (worktree / ".attachments" / "screen.png").read_bytes() == PNG

    branch = f"harness/{task.slug}"
    committed = git(repository, "ls-tree", "-r", "--name-only", branch).splitlines()
    assert "notes.txt" in committed  # the agent's work is on the branch
    assert not [name for name in committed if name.startswith(".attachments")]
    assert git(worktree, "status", "--porcelain") == ""  # nothing left over either
