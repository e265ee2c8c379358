"""The harness tools called directly: validation, permissions, listings, metadata, audit."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from harness.agents.orchestrator import Orchestrator
from harness.config.settings import MetadataField
from harness.project import Project, build_orchestrator
from harness.testing.held_runtime import HeldRuntime
from harness.tools.gateway import HarnessTools
from harness.tools.registry import Caller
from tests.support import AnsweringHumans

pytestmark = pytest.mark.anyio


@dataclasses.dataclass
class Rig:
    orchestrator: Orchestrator
    tools: HarnessTools
    runtime: HeldRuntime
    analyst: Caller

    async def call(
        self, tool: str, args: dict[str, Any], caller: Caller | None = None
    ) -> tuple[dict[str, Any], bool]:
        """The call as an agent's MCP server makes it: in the calling agent's name."""
        reply = await self.tools.call((caller or self.analyst).agent_id, tool, args)
        return reply.payload, reply.is_error


@pytest.fixture
async def rig(project: Project, tmp_path: Path) -> AsyncIterator[Rig]:
    runtime = HeldRuntime()
    metadata = (
        MetadataField("where", "pwd", "the folder", include_in_list=True),
        MetadataField("broken", "echo nope >&2; exit 1", "always fails"),
        MetadataField("slow", "sleep 30", "never answers in time", timeout_seconds=0.3),
    )
    config = dataclasses.replace(project.config, metadata=metadata)
    orchestrator = build_orchestrator(Project(config, project.roles), runtime)
    tools = HarnessTools(orchestrator.services)
    running = asyncio.Event()  # its record says running (written as its agent starts)
    orchestrator.subscribe(lambda event: running.set() if event.kind == "started" else None)
    handle = await orchestrator.draft("product-analyst", "plan: the rig")
    await runtime.wait_started(1)
    await asyncio.wait_for(running.wait(), 5.0)
    caller = tools.caller(handle.agent_id)
    assert caller is not None
    yield Rig(orchestrator, tools, runtime, caller)
    await orchestrator.shutdown()


def workspace_of(rig: Rig) -> Path:
    """The analyst's folder: its task's scratch workspace (no repositories configured)."""
    return rig.orchestrator.config.workspaces.root / rig.analyst.task_slug


def error_of(payload: dict[str, Any], is_error: bool) -> dict[str, str]:
    assert is_error, payload
    error: dict[str, str] = payload["error"]
    assert error["message"] and error["suggestion"]
    return error


BAD_INPUTS = [
    ("draft_agent", {}, "draft_agent: role: missing"),
    ("draft_agent", {"role": "developer"}, "draft_agent: prompt: missing"),
    (
        "draft_agent",
        {"role": 7, "prompt": "x"},
        "role: expected a non-empty string, found an integer",
    ),
    ("draft_agent", {"role": "wizard", "prompt": "x"}, "unknown role 'wizard'"),
    ("draft_agent", {"role": "developer", "prompt": "   "}, "found a string ('   ')"),
    ("draft_agent", {"role": "developer", "prompt": "x" * 20_001}, "at most 20000 characters"),
    ("draft_agent", {"role": "developer", "prompt": "x", "taskSlug": "../etc"}, "pattern"),
    ("draft_agent", {"role": "developer", "prompt": "x", "priority": 1}, "unknown key 'priority'"),
    ("await_agent", {}, "agentId: missing"),
    ("await_agent", {"agentId": "bob"}, "('bob') does not match the required pattern"),
    ("await_agent", {"agentId": "a123456", "timeoutSeconds": 0}, "must be >= 1, found 0"),
    ("kill_agent", {"agentId": 12}, "found an integer (12)"),
    ("show_agent", {"agentId": ""}, "agentId: must be at least 1 character"),
    ("list_agents", {"verbose": True}, "unknown key 'verbose'"),
    ("list_tasks", {"filter": "x"}, "unknown key 'filter'"),
    ("get_task_context", {"taskSlug": "Not A Slug"}, "does not match the required pattern"),
]


@pytest.mark.parametrize(("tool", "args", "problem"), BAD_INPUTS)
async def test_every_tool_refuses_bad_input_with_a_coded_error(
    rig: Rig, tool: str, args: dict[str, Any], problem: str
) -> None:
    error = error_of(*await rig.call(tool, args))
    assert error["code"] == "INVALID_INPUT"
    assert problem in error["message"]


@pytest.mark.parametrize("tool", ["await_agent", "kill_agent", "show_agent"])
async def test_an_unknown_agent_is_agent_not_found(rig: Rig, tool: str) -> None:
    error = error_of(*await rig.call(tool, {"agentId": "a0f0f0f"}))
    assert error["code"] == "AGENT_NOT_FOUND"
    assert "list_agents" in error["suggestion"]


async def test_an_unknown_task_is_not_found_by_the_harness_and_not_yours_to_an_agent(
    rig: Rig,
) -> None:
    unknown = {"taskSlug": "no-such-task"}
    draft = {"role": "developer", "prompt": "x", "taskSlug": "no-such-task"}
    for tool, args in (("get_task_context", unknown), ("draft_agent", draft)):
        harness = await rig.tools.invoke(tool, args, None)
        assert error_of(harness.payload, harness.is_error)["code"] == "RESOURCE_NOT_FOUND"
        # An agent hears the same as for another task's: whether it exists is not its business.
        assert error_of(*await rig.call(tool, args))["code"] == "PERMISSION_DENIED"


async def other_task(rig: Rig) -> tuple[str, str]:
    """Another person's task with a developer at work on it: (its slug, the agent's id)."""
    handle = await rig.orchestrator.draft("developer", "fix someone else's login")
    await rig.runtime.wait_started(2)
    return handle.task_slug, handle.agent_id


async def test_an_agent_sees_and_acts_on_its_own_task_only(rig: Rig) -> None:
    slug, agent_id = await other_task(rig)

    listed, _ = await rig.call("list_agents", {})
    tasks, _ = await rig.call("list_tasks", {})
    assert [a["id"] for a in listed["agents"]] == [rig.analyst.agent_id]
    assert [t["slug"] for t in tasks["tasks"]] == [rig.analyst.task_slug]
    for tool in ("show_agent", "await_agent", "kill_agent"):
        error = error_of(*await rig.call(tool, {"agentId": agent_id}))
        assert error["code"] == "AGENT_NOT_FOUND"
        assert error["message"] == f"no agent {agent_id} in your task {rig.analyst.task_slug}"
    context = error_of(*await rig.call("get_task_context", {"taskSlug": slug}))
    draft = {"role": "developer", "prompt": "do it my way", "taskSlug": slug}
    drafted = error_of(*await rig.call("draft_agent", draft))
    assert (context["code"], drafted["code"]) == ("PERMISSION_DENIED", "PERMISSION_DENIED")

    # Nothing changed in the other task: its agent still works, nobody joined it.
    assert rig.orchestrator.agent(agent_id) is not None
    assert len((await rig.orchestrator.tasks.task(slug)).dispatches) == 1


async def test_a_category_config_names_sees_and_acts_on_every_task(project: Project) -> None:
    mcp = dataclasses.replace(project.config.mcp, all_tasks_categories=("conversational",))
    config = dataclasses.replace(project.config, mcp=mcp)
    runtime = HeldRuntime()
    orchestrator = build_orchestrator(Project(config, project.roles), runtime)
    tools = HarnessTools(orchestrator.services)
    analyst = await orchestrator.draft("product-analyst", "plan: the rig")
    other = await orchestrator.draft("developer", "fix someone else's login")
    await runtime.wait_started(2)

    listed = (await tools.call(analyst.agent_id, "list_agents", {})).payload
    context = await tools.call(analyst.agent_id, "get_task_context", {"taskSlug": other.task_slug})

    assert {a["id"] for a in listed["agents"]} == {analyst.agent_id, other.agent_id}
    assert not context.is_error and "fix someone else's login" in context.payload["context"]
    await orchestrator.shutdown()


async def test_a_worker_reaching_a_full_tool_is_permission_denied_and_audited(rig: Rig) -> None:
    handle = await rig.orchestrator.draft("developer", "work", task_slug=rig.analyst.task_slug)
    await rig.runtime.wait_started(2)
    worker = rig.tools.caller(handle.agent_id)
    assert worker is not None

    error = error_of(*await rig.call("draft_agent", {"role": "developer", "prompt": "x"}, worker))
    assert error["code"] == "PERMISSION_DENIED"
    assert "list_agents" in error["suggestion"]
    audit = await rig.orchestrator.tasks.audit_log(rig.analyst.task_slug)
    assert audit[-1]["outcome"] == "PERMISSION_DENIED"
    assert audit[-1]["callerRole"] == "developer"


async def test_an_agent_cannot_await_or_kill_itself(rig: Rig) -> None:
    for tool in ("await_agent", "kill_agent"):
        error = error_of(*await rig.call(tool, {"agentId": rig.analyst.agent_id}))
        assert error["code"] == "INVALID_AGENT_STATE"


@pytest.mark.waits
async def test_draft_returns_at_once_and_await_gives_the_result(rig: Rig) -> None:
    payload, is_error = await rig.call("draft_agent", {"role": "developer", "prompt": "build"})
    assert not is_error
    assert payload["taskSlug"] == rig.analyst.task_slug
    assert payload["role"] == "developer"
    assert payload["status"] in ("queued", "running")

    timed_out, _ = await rig.call(
        "await_agent", {"agentId": payload["agentId"], "timeoutSeconds": 1}
    )
    assert timed_out["timedOut"] is True

    rig.runtime.release(payload["agentId"])
    done, _ = await rig.call("await_agent", {"agentId": payload["agentId"]})
    again, _ = await rig.call("await_agent", {"agentId": payload["agentId"]})
    assert done["status"] == again["status"] == "completed"
    assert done["result"]["summary"] == "did: build"
    assert done["parentId"] == rig.analyst.agent_id
    assert done["costUsd"] == 0.01


async def test_killing_a_finished_agent_is_an_invalid_state(rig: Rig) -> None:
    payload, _ = await rig.call("draft_agent", {"role": "developer", "prompt": "build"})
    rig.runtime.release(payload["agentId"])
    await rig.call("await_agent", {"agentId": payload["agentId"]})
    error = error_of(*await rig.call("kill_agent", {"agentId": payload["agentId"]}))
    assert error["code"] == "INVALID_AGENT_STATE"


async def test_list_agents_shows_list_metadata_and_counts_all_fields(rig: Rig) -> None:
    payload, is_error = await rig.call("list_agents", {})
    assert not is_error
    [agent] = payload["agents"]
    assert payload["total_count"] == 1
    assert agent["id"] == rig.analyst.agent_id
    assert agent["role"] == "product-analyst"
    assert agent["status"] == "running"
    assert agent["startedAt"]
    assert agent["metadata_count"] == 3
    assert agent["metadata"] == {"where": str(workspace_of(rig))}


async def test_show_agent_gives_every_field_with_its_error_and_schema(rig: Rig) -> None:
    payload, is_error = await rig.call("show_agent", {"agentId": rig.analyst.agent_id})
    assert not is_error
    agent = payload["agent"]
    assert agent["metadata_count"] == 3
    meta = agent["metadata"]
    assert meta["where"]["value"] == str(workspace_of(rig))
    assert meta["where"]["schema"] == {"description": "the folder", "include_in_list": True}
    assert meta["broken"]["value"] is None
    assert "nope" in meta["broken"]["error"]
    assert "timed out" in meta["slow"]["error"]


async def test_list_tasks_and_get_task_context(rig: Rig) -> None:
    tasks, _ = await rig.call("list_tasks", {})
    [task] = tasks["tasks"]
    assert task == {
        "slug": rig.analyst.task_slug,
        "created": task["created"],
        "description": "plan: the rig",
        "dispatchCount": 1,
    }
    context, _ = await rig.call("get_task_context", {"taskSlug": rig.analyst.task_slug})
    assert "plan: the rig" in context["context"]


async def test_every_call_is_audited_with_caller_outcome_and_duration(rig: Rig) -> None:
    await rig.call("list_tasks", {})
    await rig.call("await_agent", {"agentId": "bad"})
    audit = await rig.orchestrator.tasks.audit_log(rig.analyst.task_slug)
    assert [(e["tool"], e["outcome"]) for e in audit] == [
        ("list_tasks", "ok"),
        ("await_agent", "INVALID_INPUT"),
    ]
    for entry in audit:
        assert entry["callerAgentId"] == rig.analyst.agent_id
        assert entry["task"] == rig.analyst.task_slug
        assert entry["durationMs"] >= 0
        assert entry["time"]
    assert audit[1]["input"] == {"agentId": "bad"}


async def test_an_unknown_tool_is_tool_not_found(rig: Rig) -> None:
    error = error_of(*await rig.call("launch_missiles", {}))
    assert error["code"] == "TOOL_NOT_FOUND"


async def test_ask_human_returns_the_answer_and_who_gave_it(rig: Rig) -> None:
    channel = AnsweringHumans(rig.orchestrator.humans.answer_question)
    rig.orchestrator.humans.add_human_channel(channel)
    payload, is_error = await rig.call(
        "ask_human", {"question": "Ship it?", "options": ["no", "yes"]}
    )
    assert not is_error
    assert payload == {"answer": "yes", "answeredBy": "U42"}
    [asked] = channel.asked
    assert (asked.agent_id, asked.text, asked.options) == (
        rig.analyst.agent_id,
        "Ship it?",
        ("no", "yes"),
    )


async def test_ask_human_without_a_reachable_human_fails_at_once(rig: Rig) -> None:
    error = error_of(*await rig.call("ask_human", {"question": "Anyone?"}))
    assert error["code"] == "NO_HUMAN_AVAILABLE"


async def test_ask_human_refuses_too_many_or_too_long_options(rig: Rig) -> None:
    error = error_of(*await rig.call("ask_human", {"question": "?", "options": ["x"] * 11}))
    assert "at most 10 item(s), found 11" in error["message"]
    error = error_of(*await rig.call("ask_human", {"question": "?", "options": ["x" * 76]}))
    assert "options[0]" in error["message"]


async def test_update_progress_is_kept_in_the_record_and_announced(rig: Rig) -> None:
    seen: list[Any] = []
    rig.orchestrator.subscribe(seen.append)
    payload, is_error = await rig.call("update_progress", {"message": "half way", "percent": 50})
    assert not is_error and payload["recorded"]
    record = await rig.orchestrator.record(rig.analyst.agent_id)
    assert record.progress is not None
    assert (record.progress.message, record.progress.percent) == ("half way", 50)
    assert [e.kind for e in seen] == ["progress"]
    info = next(a for a in rig.orchestrator.agents() if a.agent_id == rig.analyst.agent_id)
    assert info.activity == "half way (50%)"
    rig.runtime.release()
    final = await rig.orchestrator.wait(rig.analyst.agent_id, 5)
    assert final.progress is not None and final.progress.message == "half way"


async def test_log_decision_is_stored_and_in_the_task_context(rig: Rig) -> None:
    payload, is_error = await rig.call(
        "log_decision", {"title": "Use REST", "body": "simpler than GraphQL for this team"}
    )
    assert not is_error and payload == {"logged": True, "decisionCount": 1}
    [decision] = (await rig.orchestrator.tasks.task(rig.analyst.task_slug)).decisions
    assert (decision.title, decision.role) == ("Use REST", "product-analyst")
    context, _ = await rig.call("get_task_context", {"taskSlug": rig.analyst.task_slug})
    assert "### Decisions" in context["context"]
    assert "**Use REST**" in context["context"]
    assert "simpler than GraphQL" in context["context"]


async def test_a_call_in_the_name_of_an_agent_that_ended_is_agent_not_found(rig: Rig) -> None:
    rig.runtime.release(rig.analyst.agent_id)
    await rig.orchestrator.wait(rig.analyst.agent_id, 5)
    error = error_of(*await rig.call("list_tasks", {}))
    assert error["code"] == "AGENT_NOT_FOUND"
    assert rig.analyst.agent_id in error["message"]
