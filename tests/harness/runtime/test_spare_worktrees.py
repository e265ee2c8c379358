"""Spare agents of a repository: a CLI started ahead in its sandbox, in a worktree made ahead,
serves the first agent of a new task in that repository as a cold start would have; a spare
whose base moved, or of another repository, is not used; nothing of them is left once their
host closes. The real Claude Code CLI against the scripted model, in real bubblewrap."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness.cli.offline import scripted_env
from harness.config.roles import Role
from harness.config.settings import RepositorySettings, WorkspaceSettings
from harness.runtime.claude import ClaudeRuntime
from harness.runtime.host import AgentHost, workspace_request
from harness.runtime.spec import (
    AgentControl,
    AgentSpec,
    RunOutcome,
)
from harness.testing.nats_server import NatsServer
from harness.testing.processes import claude_children
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn
from harness.testing.workers import worker_in_process
from harness.workspaces.manager import Workspaces
from tests.support import allowing_io, git, make_repository

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

WAIT = 60.0
# What the agent sees of where it is: its folder, branch, objects folder, its changes.
SHOW = 'pwd; git branch --show-current; echo "$GIT_OBJECT_DIRECTORY"; git status --short'


def script(request: ModelRequest) -> Turn:
    """Each agent looks where it is, commits a file named after its task and its prompt's
    last word, then finishes."""
    said = re.search(r"task (\S+): (\w+)", request.first_user_text)
    assert said, "every prompt names its task"
    slug, word = said.groups()
    commands = [
        SHOW,
        f"echo {word} > {slug}-{word}.txt && git add -A && git commit -q -m '{word} {slug}'",
    ]
    done = len(request.all_tool_results)
    if done < len(commands):
        return Turn.call("Bash", command=commands[done], description="step")
    return Turn.finish("done")


def developer() -> Role:
    role = Role("developer", "Developer", "worker", "You write code.", "roles/developer.md")
    return dataclasses.replace(role, tools=("Read", "Write", "Bash"))


@dataclasses.dataclass
class Rig:
    host: AgentHost
    workspaces: Workspaces
    model: ScriptedModel
    root: Path
    settings: WorkspaceSettings
    web: Path
    api: Path

    def template(self, repository: str = "web") -> AgentSpec:
        request = workspace_request(self.settings, repository)
        return AgentSpec(agent_id="spare", role=developer(), prompt="", cwd="", workspace=request)

    async def run(self, slug: str, word: str = "work", repository: str = "web") -> RunOutcome:
        spec = dataclasses.replace(
            self.template(repository),
            agent_id=f"a{slug}-{word}",
            prompt=f"task {slug}: {word}",
            task_slug=slug,
        )

        io = allowing_io()
        outcome = await asyncio.wait_for(self.host.run(spec, AgentControl(), io), WAIT)
        assert outcome.status == "completed", outcome.error
        return outcome

    def requests(self, slug: str, word: str = "work") -> list[ModelRequest]:
        return [
            r for r in self.model.main_requests
            if not r.is_side_request and f"task {slug}: {word}" in r.first_user_text
        ]  # fmt: skip

    def seen(self, slug: str, word: str = "work") -> str:
        """What the agent's first command said (``SHOW``)."""
        last = self.requests(slug, word)[-1]
        return last.all_tool_results[0].text

    def leftovers(self, root: Path | None = None) -> list[str]:
        """Whatever of spares is in the repositories and the workspaces' root."""
        root = root or self.root
        found = []
        for repository in (self.web, self.api):
            found += [
                b for b in git(repository, "branch", "--format=%(refname:short)").split()
                if b.startswith("harness/_")
            ]  # fmt: skip
            listed = git(repository, "worktree", "list", "--porcelain")
            found += [line for line in listed.splitlines() if "/.views/" in line]
            stores = repository / ".git/harness/tasks"  # git_stores
            if stores.is_dir():
                found += [str(p) for p in stores.iterdir() if p.name[0] == "_"]
        if (root / ".views").is_dir():
            found += [str(p) for p in (root / ".views").iterdir()]
        if (root / ".sandbox").is_dir():
            found += [str(p) for p in (root / ".sandbox").iterdir() if p.name[0] == "_"]
        return found


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    web = make_repository(tmp_path / "web", {"README.md": "web\n"})
    api = make_repository(tmp_path / "api", {"README.md": "api\n"})
    root = tmp_path / "workspaces"
    settings = WorkspaceSettings(
        root=root,
        default="web",
        repositories={
            "web": RepositorySettings("web", path=web),
            "api": RepositorySettings("api", path=api),
        },
    )
    async with ScriptedModel(script) as model:
        runtime = ClaudeRuntime(base_env=scripted_env(model.env()))
        workspaces = Workspaces(settings)
        host = AgentHost(runtime, workspaces)
        try:
            yield Rig(host, workspaces, model, root, settings, web, api)
        finally:
            await host.close()


def shape(seen: str, slug: str) -> str:
    """What the agent saw, but for its task's name and the random part of its paths."""
    text = re.sub(r"([/_])[0-9a-f]{12}\b", r"\1<id>", seen)
    return text.replace(slug, "<slug>")


def normalised(
    request: ModelRequest, slug: str, prompt: str | None = None
) -> tuple[str, str, list[str]]:
    """The request's system prompt, its prompt (or ``prompt``) and tools, but for the parts
    that differ from task to task."""

    def plain(text: str) -> str:
        text = re.sub(r"([/_-])\.?views[/-][0-9a-f]{12}", r"\1views/<folder>", text)
        text = re.sub(r"cc_version=[0-9.]+[0-9a-f]{3};", "cc_version=<v>;", text)
        return text.replace(slug, "<slug>")

    shown = request.first_user_text if prompt is None else prompt
    return plain(request.system_text), plain(shown), sorted(request.tool_names)


async def test_a_spare_worktree_serves_a_new_task_as_a_cold_start_would_have(rig: Rig) -> None:
    await rig.run("t-cold")  # no spare yet
    assert rig.host.spares is not None
    rig.host.keep_warm([(rig.template(), 1)])
    await rig.host.spares.wait_ready(1, WAIT)

    await rig.run("t-warm")

    assert rig.host.spares.served == 1
    # The agent's commit is on its task's branch, from main, as a cold agent's is.
    main = git(rig.web, "rev-parse", "main")
    for slug in ("t-cold", "t-warm"):
        assert git(rig.web, "log", "-1", "--format=%s", f"harness/{slug}") == f"work {slug}"
        assert git(rig.web, "rev-parse", f"harness/{slug}~1") == main
    workspace = await rig.workspaces.find("t-warm")
    assert workspace is not None
    assert (workspace.repository, workspace.branch, workspace.base_commit) == (
        "web", "harness/t-warm", main,
    )  # fmt: skip
    assert git(workspace.path, "status", "--short") == ""
    # The spare's object store became the task's: its commit is there, apart from the
    # repository's own objects, and no spare's store is left.
    head = git(rig.web, "rev-parse", "harness/t-warm")
    store = rig.web / ".git/harness/tasks/t-warm"
    assert (store / head[:2] / head[2:]).is_file()
    assert not (rig.web / ".git/objects" / head[:2] / head[2:]).exists()
    assert sorted(p.name for p in store.parent.iterdir() if p.name[0] != "_") == [
        "t-cold", "t-warm",
    ]  # fmt: skip
    # The same folder, branch and objects folder shapes, the same prompts and tools.
    cold, warm = shape(rig.seen("t-cold"), "t-cold"), shape(rig.seen("t-warm"), "t-warm")
    assert cold == warm
    assert (
        cold.strip() == f"{rig.root}/.views/<id>\nharness/<slug>\n{rig.root}/.sandbox/_<id>/objects"
    )
    first_cold, first_warm = rig.requests("t-cold")[0], rig.requests("t-warm")[0]
    # Its CLI read git's status while it waited, on the placeholder branch: the prompt says
    # which branch the work is on now.
    prompt, note = first_warm.first_user_text.split("\n\n(Your work is on git branch ", 1)
    assert note.startswith("`harness/t-warm`.")
    assert normalised(first_cold, "t-cold") == normalised(first_warm, "t-warm", prompt)
    # A follow-up runs cold in the task's worktree, on top of the spare's work.
    await rig.run("t-warm", "more")

    assert rig.host.spares.served == 1
    assert git(rig.web, "log", "-2", "--format=%s", "harness/t-warm").split("\n") == [
        "more t-warm",
        "work t-warm",
    ]
    assert shape(rig.seen("t-warm", "more"), "t-warm").startswith(f"{rig.root}/.views/<id>\n")


async def test_a_spare_made_before_the_base_moved_is_not_used_and_the_task_starts_from_it(
    rig: Rig,
) -> None:
    rig.host.keep_warm([(rig.template(), 1)])
    assert rig.host.spares is not None
    await rig.host.spares.wait_ready(1, WAIT)
    before = claude_children()
    (rig.web / "later.txt").write_text("later\n", encoding="utf-8")
    git(rig.web, "add", "later.txt")
    git(rig.web, "commit", "-q", "-m", "main moved")

    await rig.run("t-late")

    assert rig.host.spares.served == 0
    assert git(rig.web, "rev-parse", "harness/t-late~1") == git(rig.web, "rev-parse", "main")
    assert not before & claude_children()  # the stale spare's CLI ended
    await rig.host.spares.wait_ready(1, WAIT)  # replaced, from where main is now
    [view] = [p for p in (rig.root / ".views").iterdir() if p.is_dir() and not p.is_symlink()]
    assert git(view, "rev-parse", "HEAD") == git(rig.web, "rev-parse", "main")


async def test_a_follow_up_in_a_worktree_starts_on_its_tasks_spare_with_the_branch_as_now(
    rig: Rig,
) -> None:
    rig.host.keep_warm([], follow_ups=1)
    assert rig.host.follow_ups is not None
    await rig.run("t-next")
    await rig.host.follow_ups.wait_for("t-next", WAIT)
    worktree = rig.root / "t-next"  # the branch moves while the spare waits
    (worktree / "by-hand.txt").write_text("by hand\n", encoding="utf-8")
    git(worktree, "add", "by-hand.txt")
    git(worktree, "commit", "-q", "-m", "by hand")

    await rig.run("t-next", "more")

    assert rig.host.follow_ups.served == 1
    assert git(rig.web, "log", "-3", "--format=%s", "harness/t-next").split("\n") == [
        "more t-next",
        "by hand",
        "work t-next",
    ]
    assert shape(rig.seen("t-next", "more"), "t-next") == shape(rig.seen("t-next"), "t-next")


async def test_a_task_in_another_repository_starts_cold(rig: Rig) -> None:
    rig.host.keep_warm([(rig.template(), 1)])
    assert rig.host.spares is not None
    await rig.host.spares.wait_ready(1, WAIT)

    await rig.run("t-api", repository="api")

    assert rig.host.spares.served == 0 and rig.host.spares.ready == 1
    assert git(rig.api, "log", "-1", "--format=%s", "harness/t-api") == "work t-api"


async def test_closing_the_host_leaves_nothing_of_its_spare_worktrees(rig: Rig) -> None:
    before = claude_children()
    rig.host.keep_warm([(rig.template(), 2)])
    assert rig.host.spares is not None
    await rig.host.spares.wait_ready(2, WAIT)
    spares = claude_children() - before
    # Each: its branch, worktree, folder and gitdir file, P, object store.
    assert len(spares) == 2 and len(rig.leftovers()) == 2 * 6

    await rig.host.close()

    assert not spares & claude_children()
    assert rig.leftovers() == []


async def test_a_worker_keeps_spare_worktrees_of_the_repository_its_orchestrator_names(
    rig: Rig, tmp_path: Path
) -> None:
    async with NatsServer(tmp_path / "nats") as server:
        runtime = ClaudeRuntime(base_env=scripted_env(rig.model.env()))
        async with worker_in_process(server.url, runtime, tmp_path / "worker") as (
            worker,
            hosting,
        ):
            hosting.keep_warm([(rig.template(), 1)])  # the worker knows no repository yet
            assert worker.host.spares is not None
            await worker.host.spares.wait_ready(1, WAIT)
            spare = claude_children()
            spec = dataclasses.replace(
                rig.template(), agent_id="at-far", prompt="task t-far: work", task_slug="t-far"
            )

            io = allowing_io()
            done = await asyncio.wait_for(hosting.run(spec, AgentControl(), io), WAIT)

            assert done.status == "completed", done.error
            assert worker.host.spares.served == 1
            assert git(rig.web, "log", "-1", "--format=%s", "harness/t-far") == "work t-far"
    assert not spare & claude_children()  # the worker's spares ended with it
    assert rig.leftovers(tmp_path / "worker") == []
