"""``harness mcp`` for the tests: served over Streamable HTTP in this process (its agents the
real Claude Code CLI against a scripted model, or a runtime the test gives), and the ``mcp``
SDK's client as the outside client, with a bearer token."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.dispatcher import ProgressFnT

from harness.agents.orchestrator import Orchestrator
from harness.mcp_server.announce import Announcer
from harness.mcp_server.server import bind, build_server, endpoint_url, http_app, serving_http
from harness.mcp_server.service import McpService
from harness.project import Project, build_orchestrator
from harness.runtime.claude import ClaudeRuntime
from harness.runtime.spec import AgentRuntime
from harness.testing.scripted_model import Script, ScriptedModel

ALICE, BOB, ADMIN = "UALICE", "UBOB", "UADMIN"
TOKENS = {
    "alice-token-0123456789abcdef": ALICE,
    "bob-token-0123456789abcdef00": BOB,
    "admin-token-0123456789abcdef": ADMIN,
}
TOKEN_OF = {user: token for token, user in TOKENS.items()}


@dataclass(frozen=True)
class Served:
    url: str
    orchestrator: Orchestrator


class ServeFactory(Protocol):
    def __call__(
        self,
        script: Script | None = None,
        *,
        announcer: Announcer | None = None,
        runtime: AgentRuntime | None = None,
    ) -> contextlib.AbstractAsyncContextManager[Served]: ...


@pytest.fixture
def served(project: Project) -> ServeFactory:
    return serve_factory(project)


def serve_factory(project: Project) -> ServeFactory:
    """``async with served(script) as s:`` harness mcp over HTTP on a free port, with
    ADMIN in slack.admins (and posting in Slack through ``announcer``, if given). Its agents
    run the real CLI against ``script``, or on ``runtime`` if given (no CLI, no model)."""

    @contextlib.asynccontextmanager
    async def serve(
        script: Script | None = None,
        *,
        announcer: Announcer | None = None,
        runtime: AgentRuntime | None = None,
    ) -> AsyncIterator[Served]:
        if runtime is not None:
            async with serving(project, runtime, announcer) as served:
                yield served
            return
        assert script is not None, "served() needs a script for the real CLI, or a runtime"
        async with ScriptedModel(script) as model:
            runtime = ClaudeRuntime(base_env=model.env())
            async with serving(project, runtime, announcer) as served:
                yield served

    return serve


@contextlib.asynccontextmanager
async def serving(
    project: Project, runtime: AgentRuntime, announcer: Announcer | None
) -> AsyncIterator[Served]:
    slack = dataclasses.replace(project.config.slack, admins=(ADMIN,))
    config = dataclasses.replace(project.config, slack=slack)
    orchestrator = build_orchestrator(Project(config, project.roles), runtime)
    service = McpService(orchestrator, announcer)
    await service.start()
    try:
        sock = bind("127.0.0.1", 0)
        url = endpoint_url(sock, "127.0.0.1")
        server = build_server(service, local_name="local")
        app = http_app(server, TOKENS, host="127.0.0.1", port=sock.getsockname()[1])
        async with serving_http(app, sock):
            yield Served(url, orchestrator)
    finally:
        await service.close()


@contextlib.asynccontextmanager
async def connect(url: str, user: str) -> AsyncIterator[Client]:
    """The mcp SDK's client, as ``user`` (their bearer token)."""
    headers = {"Authorization": f"Bearer {TOKEN_OF[user]}"}
    timeout = httpx2.Timeout(30, read=300)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


async def call(
    client: Client, tool: str, progress: ProgressFnT | None = None, **args: Any
) -> dict[str, Any]:
    """The tool's JSON result; an error result is its ``{"error": ...}``."""
    result = await client.call_tool(tool, args, progress_callback=progress)
    [content] = result.content
    assert content.type == "text"
    payload: dict[str, Any] = json.loads(content.text)
    assert result.is_error == isinstance(payload.get("error"), dict), payload
    return payload
