"""A task's diff through ``harness mcp``: the tool and the resource, for a task in a git
repository whose agent changed a file."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.project import Project, load_project
from harness.testing.scripted_model import ModelRequest, Turn
from tests.harness.mcp_server.conftest import ALICE, ServeFactory, call, connect
from tests.support import make_repository

pytestmark = pytest.mark.anyio


@pytest.fixture
def project(project_dir: Path, tmp_path: Path) -> Project:
    """The shipped project with one repository, `web`."""
    web = make_repository(tmp_path / "web")
    with (project_dir / "config.yaml").open("a", encoding="utf-8") as file:
        file.write(f"\nworkspaces: {{repositories: {{web: {{path: {web}}}}}}}\n")
    return load_project(project_dir / "config.yaml")


def writing(request: ModelRequest) -> Turn:
    if not request.all_tool_results:
        return Turn.call("Bash", command="printf 'dark mode\\n' > settings.txt")
    return Turn.finish("wrote settings.txt", changes=["settings.txt"])


@pytest.mark.slow
async def test_a_tasks_diff_is_read_as_a_tool_and_as_a_resource(served: ServeFactory) -> None:
    async with served(writing) as s, connect(s.url, ALICE) as client:
        started = await call(client, "start_task", request="add dark mode")
        await call(client, "await_agent", agentId=started["agentId"])
        slug = started["taskSlug"]

        diff = await call(client, "get_task_diff", taskSlug=slug)
        assert (diff["agentId"], diff["branch"]) == (started["agentId"], f"harness/{slug}")
        assert "+dark mode" in diff["diff"]
        assert "settings.txt" in diff["diffStat"]
        resource = await client.read_resource(f"harness://tasks/{slug}/diff")
        assert resource.contents[0].text == diff["diff"]  # type: ignore[union-attr]
        listed = await client.list_resources()
        assert f"harness://tasks/{slug}/diff" in [r.uri for r in listed.resources]
