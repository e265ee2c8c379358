"""From a task's branch to a pull request: the harness pushes with its own credentials,
opens (or updates) the pull request with a body made from the task's results, follows its
checks and drafts a developer to fix failed ones. A bare repository as the remote (real git
push) and a loopback GitHub REST API."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness.agents.authority import Authority
from harness.agents.events import AgentEvent, Events
from harness.agents.orchestrator import Orchestrator
from harness.agents.pull_requests import PullRequestEvent, PullRequests
from harness.errors import ForgeError, NotAllowedError
from harness.project import Project, build_orchestrator
from harness.runtime.claude import ClaudeRuntime
from harness.tasks.files import FileTaskStore
from harness.tasks.model import AgentResult, ThreadRef
from harness.testing.fake_github import CheckRun
from harness.testing.records import make_record
from harness.testing.scripted_model import ModelRequest, Turn
from tests.forge_support import FULL_NAME, Forge, commit_on_branch, forge, with_forge
from tests.harness.conftest import HarnessFactory
from tests.support import git

pytestmark = [pytest.mark.anyio, pytest.mark.git]
__all__ = ["forge"]  # the fixture, used by name

WAIT = 30.0
THREAD_URL = "https://acme.slack.com/archives/C1/p1700000000000100"


@pytest.fixture
def project(project_dir: Path, forge: Forge) -> Project:
    return with_forge(project_dir, forge)


@pytest.fixture
async def orchestrator(project: Project) -> AsyncIterator[Orchestrator]:
    orchestrator = build_orchestrator(project, ClaudeRuntime())
    yield orchestrator
    await orchestrator.shutdown()


class Seen:
    """The pull request events, waited on by kind."""

    def __init__(self, orchestrator: Orchestrator) -> None:
        self.events: list[PullRequestEvent] = []
        self._changed = asyncio.Condition()
        orchestrator.pull_requests.subscribe(self._add)

    async def _add(self, event: PullRequestEvent) -> None:
        async with self._changed:
            self.events.append(event)
            self._changed.notify_all()

    async def wait(self, kind: str, checks: str | None = None) -> PullRequestEvent:
        def found() -> PullRequestEvent | None:
            for event in self.events:
                pull = event.pull_request
                if event.kind == kind and (checks is None or (pull and pull.checks == checks)):
                    return event
            return None

        async with asyncio.timeout(WAIT), self._changed:
            await self._changed.wait_for(lambda: found() is not None)
        event = found()
        assert event is not None
        return event


async def worked_task(orchestrator: Orchestrator, forge: Forge, requester: str = "U1") -> str:
    """A task in `web` whose developer committed on its branch and reported."""
    task = await orchestrator.tasks.create_task(
        "Add a settings page", ThreadRef("C1", "1700000000.000100"), "web", requester=requester
    )
    commit_on_branch(forge.repository, f"harness/{task.slug}", "settings.html", "<h1>Settings\n")
    result = AgentResult(
        "Added the settings page.", ("settings.html: the page",), ("the save button is a stub",)
    )
    record = make_record("a0000000001", status="completed", result=result)
    # As the process that ran the developer stored it: the store is safe across processes.
    await FileTaskStore(orchestrator.config.tasks_dir).save_dispatch(task.slug, record)
    return task.slug


async def test_a_pull_request_is_opened_from_the_pushed_branch_with_the_tasks_results(
    orchestrator: Orchestrator, forge: Forge
) -> None:
    seen = Seen(orchestrator)
    slug = await worked_task(orchestrator, forge)

    pull = await orchestrator.pull_requests.open_pull_request(slug, by="U1", thread_url=THREAD_URL)

    branch = f"harness/{slug}"
    assert forge.remote_branch(branch) == git(forge.repository, "rev-parse", branch)
    [opened] = forge.github.pulls(FULL_NAME)
    assert (opened.head, opened.base, opened.title) == (branch, "main", "Add a settings page")
    body = opened.body or ""
    assert "Added the settings page." in body and "- settings.html: the page" in body
    assert "## Left open\n- the save button is a stub" in body
    assert "Asked by U1." in body and THREAD_URL in body
    assert opened.user == "harness-bot"  # U1 linked no account: the bot opened it for them
    assert pull.number == opened.number and pull.url.endswith(f"/{FULL_NAME}/pull/1")
    assert (await orchestrator.tasks.task(slug)).pull_request == pull
    assert (await seen.wait("opened")).pull_request == pull


async def test_opening_again_updates_the_same_pull_request_and_pushes_new_commits(
    orchestrator: Orchestrator, forge: Forge
) -> None:
    slug = await worked_task(orchestrator, forge)
    first = await orchestrator.pull_requests.open_pull_request(slug, by="U1")
    head = commit_on_branch(forge.repository, f"harness/{slug}", "more.txt", "more\n")

    again = await orchestrator.pull_requests.open_pull_request(
        slug, by=None
    )  # the terminal's own user

    assert again.number == first.number and len(forge.github.pulls(FULL_NAME)) == 1
    assert forge.remote_branch(f"harness/{slug}") == head == again.head_commit


async def test_only_the_requester_or_an_admin_may_open_it(
    orchestrator: Orchestrator, forge: Forge
) -> None:
    slug = await worked_task(orchestrator, forge)

    with pytest.raises(NotAllowedError):
        await orchestrator.pull_requests.open_pull_request(slug, by="U2")
    assert forge.github.pulls(FULL_NAME) == [] and forge.remote_branch(f"harness/{slug}") is None


async def test_a_repository_without_a_forge_or_a_task_without_one_says_the_fix(
    orchestrator: Orchestrator, forge: Forge
) -> None:
    scratch = await orchestrator.tasks.create_task("write a poem", requester="U1")
    with pytest.raises(ForgeError) as no_repository:
        await orchestrator.pull_requests.open_pull_request(scratch.slug, by="U1")
    assert no_repository.value.failure == "no-branch"
    assert "scratch folder" in no_repository.value.message

    slug = await worked_task(orchestrator, forge)
    config = orchestrator.config
    bare = dataclasses.replace(config.workspaces.repositories["web"], github=None)
    workspaces = dataclasses.replace(config.workspaces, repositories={"web": bare})
    unforged = PullRequests(
        dataclasses.replace(config, workspaces=workspaces),
        FileTaskStore(config.tasks_dir),
        orchestrator.tasks,
        Authority(config.slack.admins),
        Events[AgentEvent](),
        orchestrator.draft,
    )
    with pytest.raises(ForgeError) as no_forge:
        await unforged.open_pull_request(slug, by="U1")
    assert no_forge.value.failure == "no-forge"
    assert "add `github: OWNER/NAME` under workspaces.repositories.web" in no_forge.value.fix


@pytest.mark.parametrize(
    ("status", "failure", "said"),
    [
        (401, "credentials", "set a valid token in GITHUB_TOKEN"),
        (403, "forbidden", "write access"),
        (404, "not-found", "check `github:` of the repository"),
        (422, "rejected", "GitHub refused opening a pull request"),
        (502, "unavailable", "try again in a minute"),
    ],
)
async def test_a_refusal_from_github_says_what_to_do_and_a_retry_finishes_the_job(
    orchestrator: Orchestrator, forge: Forge, status: int, failure: str, said: str
) -> None:
    slug = await worked_task(orchestrator, forge)
    forge.github.fail_next("POST", rf"/repos/{FULL_NAME}/pulls", status)

    with pytest.raises(ForgeError) as refused:
        await orchestrator.pull_requests.open_pull_request(slug, by="U1")

    assert refused.value.failure == failure and refused.value.status == status
    assert said in f"{refused.value.message} {refused.value.fix}"
    assert forge.remote_branch(f"harness/{slug}") is not None  # the push is kept
    pull = await orchestrator.pull_requests.open_pull_request(
        slug, by="U1"
    )  # one more try finishes it
    assert [p.number for p in forge.github.pulls(FULL_NAME)] == [pull.number]


@pytest.mark.waits
async def test_a_short_rate_limit_is_waited_out_and_a_long_one_says_when(
    orchestrator: Orchestrator, forge: Forge
) -> None:
    slug = await worked_task(orchestrator, forge)
    forge.github.fail_next("POST", rf"/repos/{FULL_NAME}/pulls", 429, headers={"Retry-After": "1"})
    assert (await orchestrator.pull_requests.open_pull_request(slug, by="U1")).number == 1

    other = await worked_task(orchestrator, forge)
    forge.github.fail_next("*", rf"/repos/{FULL_NAME}/pulls", 403, times=2,
                           headers={"Retry-After": "3600"})  # fmt: skip
    with pytest.raises(ForgeError) as limited:
        await orchestrator.pull_requests.open_pull_request(other, by="U1")
    assert limited.value.failure == "rate-limited" and limited.value.retry_after == 3600
    assert "for 3600 s" in limited.value.message


async def test_no_token_for_the_bot_names_the_variable(
    orchestrator: Orchestrator, forge: Forge, monkeypatch: pytest.MonkeyPatch
) -> None:
    slug = await worked_task(orchestrator, forge)
    monkeypatch.delenv("GITHUB_TOKEN")

    with pytest.raises(ForgeError) as missing:
        await orchestrator.pull_requests.open_pull_request(slug, by="U1")
    assert missing.value.failure == "credentials"
    assert "GITHUB_TOKEN is not set" in missing.value.message


async def test_a_push_the_remote_refuses_says_why_and_keeps_the_branch(
    orchestrator: Orchestrator, forge: Forge, tmp_path: Path
) -> None:
    slug = await worked_task(orchestrator, forge)
    branch = f"harness/{slug}"
    # Someone else pushed to the task's branch meanwhile.
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(forge.remote), str(other))
    git(other, "checkout", "-q", "-b", branch)
    (other / "theirs.txt").write_text("theirs\n", encoding="utf-8")
    git(other, "add", "-A")
    git(other, "-c", "user.email=o@example.com", "-c", "user.name=O", "commit", "-q", "-m", "x")
    git(other, "push", "-q", "origin", branch)

    with pytest.raises(ForgeError) as diverged:
        await orchestrator.pull_requests.open_pull_request(slug, by="U1")
    assert diverged.value.failure == "rejected"
    assert "someone pushed to it" in diverged.value.message
    assert git(forge.repository, "branch", "--list", branch)  # the task's own work stays

    hook = forge.remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'GH006: Protected branch update failed' >&2\nexit 1\n")
    hook.chmod(0o755)
    protected = await worked_task(orchestrator, forge)
    with pytest.raises(ForgeError) as refused:
        await orchestrator.pull_requests.open_pull_request(protected, by="U1")
    assert refused.value.failure == "forbidden" and "protected" in refused.value.message


def fixing_developer(request: ModelRequest) -> Turn:
    """Fixes what the log says: writes the file the failing test wanted."""
    cwd = re.search(r"Primary working directory: (\S+)", request.system_text)
    assert cwd, "the CLI names the working directory"
    if not request.all_tool_results:
        return Turn.call("Write", file_path=f"{cwd.group(1)}/fixed.txt", content="fixed\n")
    return Turn.finish("fixed the failing test", ["fixed.txt: what the test wanted"])


@pytest.mark.slow
async def test_failed_checks_draft_a_fix_whose_commits_update_the_pull_request(
    harness_with: HarnessFactory, forge: Forge, project: Project
) -> None:
    orchestrator, model = await harness_with(
        fixing_developer,
        tune=lambda config: dataclasses.replace(
            config, github=dataclasses.replace(config.github, auto_fix_tries=1)
        ),
    )
    seen = Seen(orchestrator)
    slug = await worked_task(orchestrator, forge)
    pull = await orchestrator.pull_requests.open_pull_request(slug, by="U1")
    assert pull.head_commit is not None
    forge.github.set_check_runs(FULL_NAME, pull.head_commit, [CheckRun("lint", "in_progress")])
    await seen.wait("checks", checks="pending")
    forge.github.set_check_runs(FULL_NAME, pull.head_commit, [
        CheckRun("lint", "completed", "success"),
        CheckRun("tests", "completed", "failure", log="FAILED test_settings: fixed.txt missing"),
    ])  # fmt: skip

    failed = await seen.wait("checks", checks="failed")
    assert failed.pull_request is not None and failed.pull_request.failing == ("tests",)
    fixing = await seen.wait("fixing")
    assert fixing.agent_id is not None
    record = await orchestrator.wait(fixing.agent_id, WAIT)
    assert record.status == "completed", record.error
    prompt = model.main_requests[0].first_user_text
    assert "FAILED test_settings: fixed.txt missing" in prompt and "#1" in prompt

    updated = await seen.wait("updated")
    assert updated.pull_request is not None
    new_head = updated.pull_request.head_commit
    assert new_head is not None and new_head != pull.head_commit
    assert forge.remote_branch(f"harness/{slug}") == new_head
    assert "fixed.txt" in git(forge.remote, "show", "--stat", "--format=", new_head)
    forge.github.set_check_runs(FULL_NAME, new_head, [CheckRun("tests", "completed", "success")])
    passed = await seen.wait("checks", checks="passed")
    assert passed.pull_request is not None and passed.pull_request.fix_tries == 1


async def test_a_linked_persons_pull_request_is_opened_as_them_until_they_unlink(
    orchestrator: Orchestrator, forge: Forge
) -> None:
    forge.github.add_oauth_app("Iv1.harness-tests")
    login = await orchestrator.accounts.start_github_link("U1")
    assert login.verification_uri == f"{forge.github.web_url}/login/device"
    forge.github.approve_device(login.user_code, "alice")
    assert await asyncio.wait_for(login.linked, WAIT) == "alice"
    assert await orchestrator.accounts.github_login("U1") == "alice"

    pull = await orchestrator.pull_requests.open_pull_request(
        await worked_task(orchestrator, forge), by="U1"
    )

    [theirs] = forge.github.pulls(FULL_NAME)
    assert theirs.user == "alice" and pull.opened_by == "alice"
    assert "Opened by the bot" not in (theirs.body or "")

    assert await orchestrator.accounts.unlink_github("U1") is True
    await orchestrator.pull_requests.open_pull_request(
        await worked_task(orchestrator, forge), by="U1"
    )
    bots = forge.github.pulls(FULL_NAME)[1]
    assert bots.user == "harness-bot" and "Opened by the bot for U1" in (bots.body or "")


async def test_the_bot_follows_the_checks_of_a_pull_request_another_process_opened(
    project: Project, forge: Forge
) -> None:
    terminal = build_orchestrator(project, ClaudeRuntime())  # as `harness pr` does
    slug = await worked_task(terminal, forge)
    pull = await terminal.pull_requests.open_pull_request(slug, by=None)
    await terminal.shutdown()
    assert pull.head_commit is not None
    forge.github.set_check_runs(FULL_NAME, pull.head_commit,
                                [CheckRun("tests", "completed", "failure")])  # fmt: skip

    bot = build_orchestrator(project, ClaudeRuntime())
    try:
        seen = Seen(bot)
        bot.pull_requests.keep_following_pull_requests(every=0.05)
        failed = await seen.wait("checks", checks="failed")
    finally:
        await bot.shutdown()

    assert failed.task.slug == slug
