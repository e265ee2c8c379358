"""open_pull_request: a coordinator asks, the task's requester approves in its thread, the
harness pushes and opens the pull request. The real Claude Code CLI against the scripted
model, a bare repository as the remote and a loopback GitHub."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.agents.orchestrator import Orchestrator
from harness.project import Project, build_orchestrator
from harness.tasks.model import DispatchRecord, ThreadRef
from harness.testing.held_runtime import HeldRuntime
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn
from harness.tools.gateway import HarnessTools
from harness.tools.registry import Caller
from tests.forge_support import FULL_NAME, Forge, commit_on_branch, forge, with_forge
from tests.harness.conftest import HarnessFactory
from tests.support import AnsweringHumans, git

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
__all__ = ["forge"]  # the fixture, used by name

WAIT = 60.0
OPEN = "mcp__harness__open_pull_request"


@pytest.fixture
def project(project_dir: Path, forge: Forge) -> Project:
    return with_forge(project_dir, forge)


def analyst(request: ModelRequest) -> Turn:
    """Asks for the pull request once, then reports what the tool said."""
    if OPEN not in request.tool_names:
        return Turn.finish("not offered the tool")
    if not request.all_tool_results:
        return Turn.call(OPEN)
    return Turn.finish("asked for the pull request", issues=[request.all_tool_results[-1].text])


async def run_analyst(
    harness_with: HarnessFactory, forge: Forge, reply: str
) -> tuple[Orchestrator, ScriptedModel, AnsweringHumans, str, DispatchRecord]:
    """A task of U42's in `web` with a commit on its branch; its analyst (the real CLI) calls
    the tool and U42 answers the approval with ``reply``."""
    orchestrator, model = await harness_with(analyst)
    humans = AnsweringHumans(orchestrator.humans.answer_question, reply=reply)
    orchestrator.humans.add_human_channel(humans)
    task = await orchestrator.tasks.create_task(
        "Add a settings page", ThreadRef("C1", "1700000000.000100"), "web", requester="U42"
    )
    commit_on_branch(forge.repository, f"harness/{task.slug}", "settings.html", "<h1>Hi\n")
    handle = await orchestrator.draft(
        "product-analyst", "open the pull request", task_slug=task.slug, requested_by="U42"
    )
    record = await orchestrator.wait(handle.agent_id, WAIT)
    assert record.status == "completed", record.error
    return orchestrator, model, humans, task.slug, record


async def test_an_approved_call_pushes_the_branch_and_opens_the_pull_request(
    harness_with: HarnessFactory, forge: Forge
) -> None:
    orchestrator, model, humans, slug, record = await run_analyst(harness_with, forge, "allow")

    branch = f"harness/{slug}"
    [question] = humans.asked
    assert question.kind == "approval" and question.options == ("Allow once", "Deny")
    assert f"push branch `harness/{slug}` to {FULL_NAME}" in question.text
    [pull] = forge.github.pulls(FULL_NAME)
    assert (pull.head, pull.base) == (branch, "main")
    assert "Asked by U42." in (pull.body or "")
    assert forge.remote_branch(branch) == git(forge.repository, "rev-parse", branch)
    url = f"{forge.github.web_url}/{FULL_NAME}/pull/{pull.number}"
    assert record.result is not None
    [said] = record.result.issues
    assert url in said and f'"branch": "{branch}"' in said and '"openedBy": "harness-bot"' in said
    assert (await orchestrator.tasks.task(slug)).pull_request is not None
    audit = await orchestrator.tasks.audit_log(slug)
    assert [(e["tool"], e["outcome"]) for e in audit] == [("open_pull_request", "ok")]
    assert model.main_requests[0].tool_names.count(OPEN) == 1


async def test_a_denied_call_pushes_nothing_and_tells_the_agent_why(
    project: Project, forge: Forge
) -> None:
    # The denial is the harness's: a held analyst's call, made as its MCP server makes it, is
    # enough (the tool called through the real CLI, its reply heard: the approved call above).
    runtime = HeldRuntime()
    orchestrator = build_orchestrator(project, runtime)
    humans = AnsweringHumans(
        orchestrator.humans.answer_question, reply="deny: not before the review"
    )
    orchestrator.humans.add_human_channel(humans)
    try:
        task = await orchestrator.tasks.create_task(
            "Add a settings page", ThreadRef("C1", "1700000000.000100"), "web", requester="U42"
        )
        slug = task.slug
        commit_on_branch(forge.repository, f"harness/{slug}", "settings.html", "<h1>Hi\n")
        handle = await orchestrator.draft(
            "product-analyst", "open the pull request", task_slug=slug, requested_by="U42"
        )
        await runtime.wait_started(1)

        reply = await HarnessTools(orchestrator.services).call(
            handle.agent_id, "open_pull_request", {}
        )

        assert len(humans.asked) == 1
        assert forge.github.pulls(FULL_NAME) == []
        assert forge.remote_branch(f"harness/{slug}") is None
        assert reply.is_error
        said = json.dumps(reply.payload)
        assert "PERMISSION_DENIED" in said and "denied by U42: not before the review" in said
        assert (await orchestrator.tasks.task(slug)).pull_request is None
        audit = await orchestrator.tasks.audit_log(slug)
        assert [(e["tool"], e["outcome"]) for e in audit] == [
            ("open_pull_request", "PERMISSION_DENIED")
        ]
    finally:
        runtime.release()
        await orchestrator.shutdown()


async def test_a_worker_is_not_offered_the_tool_and_a_call_is_refused_and_audited(
    harness_with: HarnessFactory, forge: Forge
) -> None:
    orchestrator, _ = await harness_with(analyst)
    tools = HarnessTools(orchestrator.services)
    developer = orchestrator.role("developer")
    assert "open_pull_request" not in {t.name for t in tools.declarations(developer)}
    coordinator = orchestrator.role("product-analyst")
    assert "open_pull_request" in {t.name for t in tools.declarations(coordinator)}
    task = await orchestrator.tasks.create_task("Add a page", repository="web", requester="U42")

    caller = Caller("a0000000001", "developer", "worker", task.slug, 0)
    reply = await tools.invoke("open_pull_request", {}, caller)

    assert reply.is_error and reply.payload["error"]["code"] == "PERMISSION_DENIED"
    assert (
        forge.github.pulls(FULL_NAME) == [] and forge.remote_branch(f"harness/{task.slug}") is None
    )
    audit = await orchestrator.tasks.audit_log(task.slug)
    assert [(e["tool"], e["outcome"]) for e in audit] == [
        ("open_pull_request", "PERMISSION_DENIED")
    ]
