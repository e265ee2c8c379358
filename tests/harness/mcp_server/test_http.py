"""``harness mcp --transport http`` as an outside MCP client uses it: the mcp SDK's client
with a bearer token, the agents the real Claude Code CLI against a scripted model (held agents
where only the server's rules are proven)."""

from __future__ import annotations

import asyncio
import logging

import httpx2
import pytest
from mcp.shared.exceptions import MCPError

from harness.testing.held_runtime import HeldRuntime
from harness.testing.scripted_model import ModelRequest, Turn
from tests.harness.mcp_server.conftest import (
    ADMIN,
    ALICE,
    BOB,
    TOKEN_OF,
    ServeFactory,
    call,
    connect,
)

pytestmark = pytest.mark.anyio

WAIT = 60.0


def finishing(request: ModelRequest) -> Turn:
    return Turn.finish(f"did: {request.last_user_text[-40:]}", changes=["settings.py"])


@pytest.mark.slow
async def test_a_task_started_over_http_is_awaited_to_its_result_with_progress(
    served: ServeFactory,
) -> None:
    async with served(finishing) as s, connect(s.url, ALICE) as client:
        started = await call(client, "start_task", request="add a settings page")
        assert started["role"] == "developer" and started["thread"] is None
        heard: list[str] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            heard.append(message or "")

        result = await call(client, "await_agent", on_progress, agentId=started["agentId"])

        assert result["status"] == "completed"
        assert result["result"]["summary"].startswith("did: ")
        assert result["result"]["changes"] == ["settings.py"]
        assert f"developer {started['agentId']} completed" in heard
        [task] = (await call(client, "list_tasks"))["tasks"]
        assert (task["slug"], task["requester"], task["status"]) == (
            started["taskSlug"], ALICE, "completed"
        )  # fmt: skip
        shown = await call(client, "show_task", taskSlug=task["slug"])
        assert [d["agentId"] for d in shown["task"]["dispatches"]] == [started["agentId"]]
        context = await client.read_resource(f"harness://tasks/{task['slug']}/context")
        assert "add a settings page" in context.contents[0].text  # type: ignore[union-attr]
        audit = await s.orchestrator.tasks.audit_log(task["slug"])
        assert [(e["tool"], e["callerUser"]) for e in audit] == [("mcp:start_task", ALICE)]


async def test_only_the_requester_or_an_admin_kills_an_agent(served: ServeFactory) -> None:
    # Who may kill is the MCP server's: a held agent is enough (a real CLI killed through
    # harness mcp: test_client_disconnect.py's and test_stdio.py's kill_agent calls).
    held = HeldRuntime()
    async with (
        served(runtime=held) as s,
        connect(s.url, ALICE) as alice,
        connect(s.url, BOB) as bob,
    ):
        started = await call(alice, "start_task", request="a long job")
        agent = started["agentId"]
        await held.wait_started(1)

        refused = await call(bob, "kill_agent", agentId=agent)
        assert refused["error"]["code"] == "PERMISSION_DENIED"
        assert "only the person who asked for it (UALICE)" in refused["error"]["message"]

        killed = await call(alice, "kill_agent", agentId=agent)
        assert killed["success"] is True, killed
        assert (await call(bob, "await_agent", agentId=agent))["status"] == "killed"
        again = await call(alice, "kill_agent", agentId=agent)
        assert again["error"]["code"] == "INVALID_AGENT_STATE"


async def test_an_admin_stops_anyones_agent(served: ServeFactory) -> None:
    # As above: a held agent (a real CLI killed: test_stdio.py, test_client_disconnect.py).
    held = HeldRuntime()
    async with (
        served(runtime=held) as s,
        connect(s.url, ALICE) as alice,
        connect(s.url, ADMIN) as admin,
    ):
        started = await call(alice, "start_task", request="a long job")
        await held.wait_started(1)
        listed = await call(admin, "list_agents")
        assert [a["id"] for a in listed["agents"]] == [started["agentId"]]
        assert (await call(admin, "kill_agent", agentId=started["agentId"]))["success"]


@pytest.mark.waits
async def test_awaiting_a_working_agent_says_at_once_what_it_does(served: ServeFactory) -> None:
    # The lines heard are the MCP server's: a held agent is enough (a real CLI awaited with
    # progress: the first test here and the approval test below).
    held = HeldRuntime()
    async with (
        served(runtime=held) as s,
        connect(s.url, ALICE) as alice,
    ):
        started = await call(alice, "start_task", request="a long job")
        await held.wait_started(1)
        heard: list[str] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            heard.append(message or "")

        # Shorter than the pause between "still working" lines: only the first one is heard.
        waited = await call(
            alice, "await_agent", on_progress, agentId=started["agentId"], timeoutSeconds=1
        )

        assert waited["timedOut"] is True
        assert heard and heard[0].startswith(f"developer {started['agentId']} "), heard
        await call(alice, "kill_agent", agentId=started["agentId"])


def pushing(request: ModelRequest) -> Turn:
    """Asks to run a command that leaves the sandbox (asked of a human), then reports."""
    if not request.all_tool_results:
        return Turn.call("Bash", command="git push -h")
    return Turn.finish("ran it", issues=[r.text for r in request.all_tool_results])


@pytest.mark.slow
async def test_an_approval_is_answered_by_the_requester_not_by_someone_else(
    served: ServeFactory,
) -> None:
    async with (
        served(pushing) as s,
        connect(s.url, ALICE) as alice,
        connect(s.url, BOB) as bob,
    ):
        started = await call(alice, "start_task", request="push it")
        asked = asyncio.Event()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            if "waiting for approval" in (message or ""):
                asked.set()

        awaiting = asyncio.ensure_future(
            call(alice, "await_agent", on_progress, agentId=started["agentId"])
        )
        await asyncio.wait_for(asked.wait(), WAIT)
        [question] = (await call(alice, "list_questions"))["questions"]
        assert question["kind"] == "approval"
        assert "git push -h" in question["text"]
        assert (await call(bob, "list_questions"))["questions"] == []

        refused = await call(bob, "answer_question", questionId=question["questionId"],
                             answer="allow")  # fmt: skip
        assert refused["error"]["code"] == "PERMISSION_DENIED"
        vague = await call(alice, "answer_question", questionId=question["questionId"],
                           answer="what does it do?")  # fmt: skip
        assert vague["error"]["code"] == "INVALID_INPUT"
        answered = await call(alice, "answer_question", questionId=question["questionId"],
                              answer="allow")  # fmt: skip
        assert answered["answer"] == "Allow once"

        result = await asyncio.wait_for(awaiting, WAIT)
        assert result["status"] == "completed"
        assert "usage: git push" in result["result"]["issues"][0]


async def test_no_token_or_a_wrong_one_is_refused_with_401(
    served: ServeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}},
    }  # fmt: skip
    accept = {"Accept": "application/json, text/event-stream"}
    async with served(finishing) as s, httpx2.AsyncClient() as http:
        missing = await http.post(s.url, json=hello, headers=accept)
        wrong = await http.post(
            s.url, json=hello, headers={**accept, "Authorization": "Bearer not-a-token"}
        )
        alice = {**accept, "Authorization": f"Bearer {TOKEN_OF[ALICE]}"}
        right = await http.post(s.url, json=hello, headers=alice)
    assert (missing.status_code, wrong.status_code) == (401, 401)
    assert missing.headers["www-authenticate"].startswith("Bearer ")
    assert right.status_code == 200
    assert caplog.records  # the server did log: not a token in it
    assert not [token for token in TOKEN_OF.values() if token in caplog.text]


async def test_bad_input_and_unknown_things_come_back_in_the_harness_error_shape(
    served: ServeFactory,
) -> None:
    async with served(finishing) as s, connect(s.url, ALICE) as client:
        unknown_role = await call(client, "start_task", request="x", role="wizard")
        assert unknown_role["error"]["code"] == "INVALID_INPUT"
        assert "developer" in unknown_role["error"]["suggestion"]
        extra = await call(client, "list_tasks", surprise=1)
        assert extra["error"]["code"] == "INVALID_INPUT"
        missing = await call(client, "get_task_context", taskSlug="no-such-task")
        assert missing["error"]["code"] == "RESOURCE_NOT_FOUND"
        no_slack = await call(client, "start_task", request="x", channel="C0123ABCD")
        assert "SLACK_BOT_TOKEN" in no_slack["error"]["suggestion"]
        with pytest.raises(MCPError) as unread:
            await client.read_resource("harness://tasks/no-such-task/context")
        assert unread.value.error.data["error"]["code"] == "RESOURCE_NOT_FOUND"
