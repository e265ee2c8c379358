"""The scripted Messages API: unit tests of its pieces, and the real bundled Claude Code CLI
driven through claude_agent_sdk against it (marked ``slow``)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    ClaudeSDKError,
    Message,
    ResultMessage,
    TextBlock,
    create_sdk_mcp_server,
    query,
    tool,
)

from harness.tasks.model import RESULT_SCHEMA
from harness.testing.scripted_model import (
    AWAIT_TOOL,
    DRAFT_TOOL,
    STRUCTURED_OUTPUT_TOOL,
    ModelRequest,
    ScriptedModel,
    ToolCall,
    Turn,
    demo_script,
)

ECHO_TOOL = "mcp__harness__echo"


# --------------------------------------------------------------------------- helpers


def _options(model: ScriptedModel, cwd: Path, **kwargs: Any) -> ClaudeAgentOptions:
    return ClaudeAgentOptions(env=model.env(), tools=[], setting_sources=[], cwd=cwd, **kwargs)


async def _collect(messages: AsyncIterator[Message]) -> list[Message]:
    collected: list[Message] = []
    try:
        async for message in messages:
            collected.append(message)
    except ClaudeSDKError:  # an is_error result is yielded first, then raised
        pass
    return collected


def _result(messages: list[Message]) -> ResultMessage:
    results = [m for m in messages if isinstance(m, ResultMessage)]
    assert results, f"no ResultMessage in {messages!r}"
    return results[-1]


def _request(messages: list[dict[str, Any]], **extra: Any) -> ModelRequest:
    body: dict[str, Any] = {"model": "m", "messages": messages, "metadata": {}, "stream": True}
    return ModelRequest(body={**body, **extra}, headers={}, received_at=0.0)


def _tools(*names: str) -> list[dict[str, Any]]:
    return [{"name": name, "input_schema": {"type": "object"}} for name in names]


def _echo_server() -> Any:
    @tool("echo", "Echo the text back", {"text": str})
    async def echo(args: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": f"echo: {args['text']}"}]}

    return create_sdk_mcp_server("harness", tools=[echo])


# --------------------------------------------------------------------------- units


def test_turn_constructors() -> None:
    assert Turn.say("hi") == Turn(text="hi")
    assert Turn.call("x", name="n", value=1).tool_calls == (
        ToolCall("x", {"name": "n", "value": 1}),
    )
    finish = Turn.finish("done", ["c"], questions=("q?",))
    assert finish.stop_reason == "tool_use"
    assert finish.tool_calls[0].name == STRUCTURED_OUTPUT_TOOL
    assert finish.tool_calls[0].input == {
        "summary": "done",
        "changes": ["c"],
        "issues": [],
        "questions": ["q?"],
    }
    assert Turn.say("x").stop_reason == "end_turn"


def test_model_request_views() -> None:
    request = _request(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "<system-reminder>\ngit status\n</system-reminder>"},
                    {"type": "text", "text": "Fix the bug"},
                ],
            },
            {"role": "system", "content": "# Environment"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "calling"},
                    {"type": "tool_use", "id": "t1", "name": ECHO_TOOL, "input": {"text": "a"}},
                    {"type": "tool_use", "id": "t2", "name": "Bash", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [{"type": "text", "text": "ok"}],
                    },
                    {"type": "tool_result", "tool_use_id": "t2", "content": "no", "is_error": True},
                ],
            },
        ],
        system=[{"type": "text", "text": "You are X."}, {"type": "text", "text": "ROLE"}],
        tools=_tools(STRUCTURED_OUTPUT_TOOL, ECHO_TOOL),
    )
    assert request.first_user_text == "Fix the bug"
    assert request.last_user_text == "Fix the bug"
    assert request.system_text == "You are X.\nROLE\n# Environment"
    assert request.tool_names == [STRUCTURED_OUTPUT_TOOL, ECHO_TOOL]
    assert request.is_structured
    assert not request.is_side_request
    results = request.tool_results
    assert [(r.tool_use_id, r.tool_name, r.text, r.is_error) for r in results] == [
        ("t1", ECHO_TOOL, "ok", False),
        ("t2", "Bash", "no", True),
    ]
    assert results[0].tool_input == {"text": "a"}


@pytest.mark.anyio
async def test_side_requests_get_canned_replies_without_the_script() -> None:
    calls: list[ModelRequest] = []

    def script(request: ModelRequest) -> Turn:
        calls.append(request)
        return Turn.say("main")

    title_request = {
        "model": "m",
        "messages": [{"role": "user", "content": "<session>hi</session>"}],
        "tools": [],
        "output_config": {
            "format": {
                "type": "json_schema",
                "schema": {"type": "object", "properties": {"title": {"type": "string"}}},
            }
        },
        "stream": False,
    }
    async with ScriptedModel(script) as model, aiohttp.ClientSession() as session:
        async with session.head(f"{model.base_url}/api/hello") as head:
            assert head.status == 200
        async with session.post(f"{model.base_url}/v1/messages", json=title_request) as reply:
            message = await reply.json()
        async with session.post(
            f"{model.base_url}/v1/messages/count_tokens", json=title_request
        ) as counted:
            assert (await counted.json())["input_tokens"] > 0
    assert calls == []
    assert json.loads(message["content"][0]["text"]) == {"title": "Scripted session"}
    [recorded] = model.requests
    assert recorded.is_side_request
    assert model.main_requests == []


@pytest.mark.anyio
async def test_script_errors_are_500_without_retry() -> None:
    def script(request: ModelRequest) -> Turn:
        raise ValueError("boom")

    body = {"model": "m", "messages": [], "metadata": {}, "stream": True}
    async with (
        ScriptedModel(script) as model,
        aiohttp.ClientSession() as session,
        session.post(f"{model.base_url}/v1/messages", json=body) as reply,
    ):
        assert reply.status == 500
        assert reply.headers["x-should-retry"] == "false"
        assert "boom" in (await reply.json())["error"]["message"]
    assert len(model.errors) == 1


@pytest.mark.anyio
async def test_wait_for_request_times_out_with_what_was_seen() -> None:
    async with ScriptedModel(lambda r: Turn.say("x")) as model:
        with pytest.raises(TimeoutError, match="recorded: none"):
            await model.wait_for_request(timeout=0.05)


def test_in_thread_serves_sync_callers() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "metadata": {}}
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with ScriptedModel.in_thread(lambda r: Turn.say(f"you said {r.first_user_text}")) as model:
        post = urllib.request.Request(
            f"{model.base_url}/v1/messages",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with opener.open(post, timeout=10) as reply:
            message = json.load(reply)
        assert model.wait_for_request_sync(timeout=5).first_user_text == "hi"
    assert message["content"] == [{"type": "text", "text": "you said hi"}]
    assert message["stop_reason"] == "end_turn"


def _use(use_id: str, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    block = {"type": "tool_use", "id": use_id, "name": name, "input": tool_input}
    return {"role": "assistant", "content": [block]}


def _answer(use_id: str, text: str, *, is_error: bool = False) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": use_id, "content": text, "is_error": is_error}
    return {"role": "user", "content": [block]}


def test_demo_script_coordinator_flow() -> None:
    prompt = "plan a login page with passwords"
    tools = _tools(STRUCTURED_OUTPUT_TOOL, DRAFT_TOOL, AWAIT_TOOL)
    user: dict[str, Any] = {"role": "user", "content": prompt}

    first = demo_script(_request([user], tools=tools))
    [draft] = first.tool_calls
    assert draft.name == DRAFT_TOOL
    assert draft.input["role"] == "developer"
    assert prompt in draft.input["prompt"]

    drafted = [
        user,
        _use("d", DRAFT_TOOL, draft.input),
        _answer("d", json.dumps({"agentId": "dev-1", "role": "developer"})),
    ]
    second = demo_script(_request(drafted, tools=tools))
    assert second.tool_calls == (ToolCall(AWAIT_TOOL, {"agentId": "dev-1"}),)

    child = {"summary": "Added the page", "changes": ["login.py"], "issues": [], "questions": ["?"]}
    awaited = [
        *drafted,
        _use("a", AWAIT_TOOL, {"agentId": "dev-1"}),
        _answer("a", json.dumps({"status": "completed", "result": child})),
    ]
    final = demo_script(_request(awaited, tools=tools)).tool_calls[0]
    assert final.name == STRUCTURED_OUTPUT_TOOL
    assert final.input["summary"] == (
        f"Plan for {prompt}: drafted developer dev-1, which reported: Added the page"
    )
    assert "login.py" in final.input["changes"]
    assert final.input["questions"] == ["?"]

    failed = [user, _use("d", DRAFT_TOOL, {}), _answer("d", "PERMISSION_DENIED", is_error=True)]
    error_finish = demo_script(_request(failed, tools=tools)).tool_calls[0]
    assert any("PERMISSION_DENIED" in issue for issue in error_finish.input["issues"])


def test_demo_script_worker_uses_task_history() -> None:
    prompt = (
        "## Task History\n\n### Original Request\nBuild login\n\n### Previous Work\n\n"
        "**developer** (completed) · agent `a1`\nSummary: Login form added.\n\n"
        "## Your Assignment\n\nreview the login form"
    )
    request = _request(
        [{"role": "user", "content": prompt}],
        system=[{"type": "text", "text": "You are a code reviewer on this team."}],
        tools=_tools(STRUCTURED_OUTPUT_TOOL, "Read"),
    )
    result = demo_script(request).tool_calls[0].input
    assert result["summary"] == (
        "Done: review the login form (building on earlier work: Login form added.)"
    )
    assert result["changes"] == ["reviewer change for: review the login form"]
    assert demo_script(request) == demo_script(request)  # deterministic
    plain = demo_script(_request([{"role": "user", "content": "hello"}]))
    assert plain.tool_calls == () and plain.text.startswith("Done: hello")


# --------------------------------------------------------------------------- the real CLI


@pytest.mark.slow
@pytest.mark.anyio
async def test_cli_plain_text_answer(tmp_path: Path) -> None:
    async with ScriptedModel(lambda r: Turn.say("Hello from the script")) as model:
        messages = await _collect(query(prompt="Say hello", options=_options(model, tmp_path)))
    texts = [
        block.text
        for m in messages
        if isinstance(m, AssistantMessage)
        for block in m.content
        if isinstance(block, TextBlock)
    ]
    assert texts == ["Hello from the script"]
    result = _result(messages)
    assert result.subtype == "success" and not result.is_error
    assert result.result == "Hello from the script"
    assert (result.total_cost_usd or 0) > 0
    [request] = model.requests
    assert request.body["stream"] is True
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert request.first_user_text == "Say hello"


@pytest.mark.slow
@pytest.mark.anyio
async def test_cli_finish_gives_structured_output(tmp_path: Path) -> None:
    turn = Turn.finish("All done", ["a.py: new"], ["flaky test"], ["ship it?"])
    async with ScriptedModel(lambda r: turn) as model:
        options = _options(
            model, tmp_path, output_format={"type": "json_schema", "schema": RESULT_SCHEMA}
        )
        messages = await _collect(query(prompt="Do the thing", options=options))
    result = _result(messages)
    assert result.subtype == "success"
    assert result.structured_output == turn.tool_calls[0].input
    [request] = model.requests  # the StructuredOutput call ends the run
    assert request.is_structured


@pytest.mark.slow
@pytest.mark.anyio
async def test_cli_runs_an_in_process_mcp_tool(tmp_path: Path) -> None:
    def script(request: ModelRequest) -> Turn:
        if not request.tool_results:
            return Turn(text="Echoing.", tool_calls=(ToolCall(ECHO_TOOL, {"text": "ping"}),))
        return Turn.finish(request.tool_results[0].text)

    async with ScriptedModel(script) as model:
        options = _options(
            model,
            tmp_path,
            mcp_servers={"harness": _echo_server()},
            allowed_tools=[ECHO_TOOL],
            output_format={"type": "json_schema", "schema": RESULT_SCHEMA},
        )
        messages = await _collect(query(prompt="Echo ping", options=options))
    first, second = model.requests
    assert ECHO_TOOL in first.tool_names  # offered directly: ENABLE_TOOL_SEARCH=false
    assert "ToolSearch" not in first.tool_names
    [echoed] = second.tool_results
    assert (echoed.tool_name, echoed.text, echoed.is_error) == (ECHO_TOOL, "echo: ping", False)
    assert _result(messages).structured_output == {
        "summary": "echo: ping",
        "changes": [],
        "issues": [],
        "questions": [],
    }


@pytest.mark.slow
@pytest.mark.anyio
async def test_cli_stalled_turn_is_interrupted(tmp_path: Path) -> None:
    stalled = Turn(text="too late", stall_seconds=60)
    async with (
        ScriptedModel(lambda r: stalled) as model,
        ClaudeSDKClient(_options(model, tmp_path)) as client,
    ):
        await client.query("Take your time")
        await model.wait_for_request(timeout=15)
        with anyio.fail_after(10):  # far below the 60 s stall
            await client.interrupt()
            messages = await _collect(client.receive_response())
    result = _result(messages)
    assert result.is_error
    assert result.subtype == "error_during_execution"
    texts = [
        b.text
        for m in messages
        if isinstance(m, AssistantMessage)
        for b in m.content
        if isinstance(b, TextBlock)
    ]
    assert "too late" not in texts


@pytest.mark.slow
@pytest.mark.anyio
async def test_cli_sees_a_failing_script_at_once(tmp_path: Path) -> None:
    def script(request: ModelRequest) -> Turn:
        raise RuntimeError("script bug")

    async with ScriptedModel(script) as model:
        with anyio.fail_after(20):  # a retried 500 would take about a minute
            messages = await _collect(query(prompt="hi", options=_options(model, tmp_path)))
    assert _result(messages).is_error
    assert len(model.requests) == 1
    assert "script bug" in model.errors[0]


@pytest.mark.slow
@pytest.mark.anyio
async def test_cli_demo_script_coordinator(tmp_path: Path) -> None:
    """The demo policy end to end, with stand-in draft/await tools."""
    drafted: list[dict[str, Any]] = []

    @tool("draft_agent", "Draft an agent", {"role": str, "prompt": str})
    async def draft_agent(args: dict[str, Any]) -> dict[str, Any]:
        drafted.append(args)
        payload = {"agentId": "dev-7", "role": args["role"], "taskSlug": "t"}
        return {"content": [{"type": "text", "text": json.dumps(payload)}]}

    @tool("await_agent", "Await an agent", {"agentId": str})
    async def await_agent(args: dict[str, Any]) -> dict[str, Any]:
        child = {"summary": "Did step 1", "changes": ["x.py"], "issues": [], "questions": []}
        payload = {"status": "completed", "result": child}
        return {"content": [{"type": "text", "text": json.dumps(payload)}]}

    server = create_sdk_mcp_server("harness", tools=[draft_agent, await_agent])
    async with ScriptedModel(demo_script) as model:
        options = _options(
            model,
            tmp_path,
            mcp_servers={"harness": server},
            allowed_tools=[DRAFT_TOOL, AWAIT_TOOL],
            output_format={"type": "json_schema", "schema": RESULT_SCHEMA},
        )
        messages = await _collect(query(prompt="plan a search box", options=options))
    assert drafted == [
        {"role": "developer", "prompt": "Implement step 1 of the plan for: plan a search box"}
    ]
    output = _result(messages).structured_output
    assert isinstance(output, dict)
    assert output["summary"] == (
        "Plan for plan a search box: drafted developer dev-7, which reported: Did step 1"
    )
    assert len(model.requests) == 3
