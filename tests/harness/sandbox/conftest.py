"""The escape rig: a developer agent of the real Claude Code CLI in real bubblewrap, placed by
the agent host in a real git worktree, in this process and on a ``harness worker`` over a real
NATS server, against the scripted model; every tool call approved, so what holds is the
sandbox alone. Escape tests in this folder take the ``rig`` fixture."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import socket
import ssl
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from harness.cli.offline import scripted_env
from harness.config.roles import Role
from harness.config.settings import SandboxSettings, WorkspaceSettings
from harness.runtime.claude import ClaudeRuntime
from harness.runtime.host import AgentHost
from harness.runtime.nats_hosting import NatsHosting
from harness.runtime.nats_link import NatsSettings
from harness.runtime.spec import (
    AgentControl,
    AgentSpec,
    Approval,
    Hosting,
    RunIO,
    RunOutcome,
    ToolReply,
    ToolUse,
)
from harness.runtime.worker import Worker
from harness.sandbox.proxy import EgressProxy, Upstream
from harness.testing.nats_server import NatsServer
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn
from harness.workspaces.manager import WorkspaceRequest, Workspaces
from tests.harness.sandbox.proxy_support import KEY, MODELS, Handler, Serve, StartProxy, free_port
from tests.harness.sandbox.proxy_support import WAIT as PROXY_WAIT
from tests.support import make_repository

WAIT = 90.0
MODEL_KEY = "sk-ant-api03-the-real-model-key"
SLACK_TOKEN = "xoxb-the-bots-slack-token"
HOST = "127.0.0.2"  # a host of the machine's loopback the sandbox does not have


class Commands:
    """The model's script: one Bash call per command, in order, then the result."""

    def __init__(self) -> None:
        self.commands: list[str] = []

    def __call__(self, request: ModelRequest) -> Turn:
        done = len(request.all_tool_results)
        if done < len(self.commands):
            return Turn.call("Bash", command=self.commands[done], description="step")
        return Turn.finish("done")


class ApproveAll:
    """Every tool call approved: the sandbox is all that stands in the way. A host outside
    the allow list is asked as a fetch of it: only those in ``hosts`` are approved."""

    def __init__(self, hosts: tuple[str, ...] = ()) -> None:
        self.hosts = hosts
        self.fetches: list[str] = []

    async def call(self, agent_id: str, tool: str, args: Mapping[str, Any]) -> ToolReply:
        return ToolReply({"error": "no harness tools here"}, is_error=True)

    async def approve(self, agent_id: str, tool: str, args: Mapping[str, Any]) -> Approval:
        if tool != "WebFetch":
            return Approval(True)
        self.fetches.append(str(args["url"]))
        return Approval(any(f"//{host}/" in str(args["url"]) for host in self.hosts), "no")


@dataclasses.dataclass
class Rig:
    hosting: Hosting
    model: ScriptedModel
    script: Commands
    repository: Path
    outside: Path  # a folder of the operator's, beside the workspaces
    allow: tuple[str, ...] = ()
    gateway: ApproveAll = dataclasses.field(default_factory=ApproveAll)

    async def run(
        self,
        *commands: str,
        slug: str = "t-1",
        mode: str = "default",
        folder: Path | None = None,
        hidden: tuple[str, ...] = (),
        role_env: Mapping[str, str] | None = None,
        pass_env: tuple[str, ...] = (),
        sandboxed: bool = True,
        budget: float | None = None,
    ) -> tuple[RunOutcome, list[str]]:
        """Runs a developer agent that makes these Bash calls; its outcome and the text of
        each call's result, in order. ``role_env``, ``budget``: the role's ``env:`` and
        ``maxBudgetUsd``; ``pass_env``, ``sandboxed``: config's ``sandbox.passEnv`` and
        whether the sandbox is on."""
        self.script.commands = list(commands)
        role = Role("developer", "Developer", "worker", "You write code.", "roles/developer.md")
        role = dataclasses.replace(
            role,
            tools=("Bash", "Read", "Write", "Edit"),
            permission_mode=mode,  # type: ignore[arg-type]
            cwd=folder,  # the role's own folder, when it has one
            env=dict(role_env or {}),
            max_budget_usd=budget,
        )
        spec = AgentSpec(
            agent_id=f"a{abs(hash((slug, commands))) % 10**10:010d}",
            role=role,
            prompt="do the work",
            cwd="/nowhere",
            task_slug=slug,
            workspace=WorkspaceRequest("web", None, str(self.repository), "main"),
            sandbox=SandboxSettings(enabled=sandboxed, network_allow=self.allow, pass_env=pass_env),
            hidden=hidden,
        )
        before = len(self.model.main_requests)

        async def seen(_use: ToolUse) -> None:
            return None

        io = RunIO(self.gateway, lambda _message: None, seen, lambda _cwd: None)
        outcome = await asyncio.wait_for(self.hosting.run(spec, AgentControl(), io), WAIT)
        # The last request that reached the model (a refused one never did).
        made = [r for r in self.model.main_requests[before:] if r.all_tool_results]
        return outcome, [result.text for result in made[-1].all_tool_results] if made else []


@contextlib.contextmanager
def operator_environment(monkeypatch: pytest.MonkeyPatch, home: Path) -> Iterator[None]:
    """The harness process as an operator runs it: its Slack token, its home with secrets."""
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n", encoding="utf-8")
    monkeypatch.setenv("SLACK_BOT_TOKEN", SLACK_TOKEN)
    monkeypatch.setenv("HOME", str(home))
    yield


@pytest.fixture(params=["in-process", pytest.param("worker over NATS", marks=pytest.mark.nats)])
async def rig(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Rig]:
    repository = make_repository(tmp_path / "web")
    outside = tmp_path / "operator"
    outside.mkdir()
    (outside / "victim.txt").write_text("keep me\n", encoding="utf-8")
    script = Commands()
    with operator_environment(monkeypatch, tmp_path / "home"):
        async with ScriptedModel(script) as model:
            env = scripted_env({**model.env(), "ANTHROPIC_API_KEY": MODEL_KEY})
            runtime = ClaudeRuntime(base_env=env)
            if request.param == "in-process":
                workspaces = Workspaces(WorkspaceSettings(root=tmp_path / "workspaces"))
                yield Rig(AgentHost(runtime, workspaces), model, script, repository, outside)
                return
            async with NatsServer(tmp_path / "nats") as server:
                settings = NatsSettings(server.url)
                worker = Worker(
                    settings, runtime, name="w1", slots=1, workspaces=tmp_path / "workspaces"
                )
                stop, ready = asyncio.Event(), asyncio.Event()
                serving = asyncio.create_task(worker.serve(stop, ready.set))
                await asyncio.wait_for(ready.wait(), WAIT)
                hosting = NatsHosting(settings, lost_after=30.0)
                try:
                    yield Rig(hosting, model, script, repository, outside)
                finally:
                    await hosting.close()
                    stop.set()
                    with contextlib.suppress(asyncio.CancelledError):
                        await asyncio.wait_for(serving, WAIT)


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` and its content (links as their target)."""
    files: dict[str, bytes] = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            files[str(path)] = os.readlink(path).encode()
        elif path.is_file():
            files[str(path)] = path.read_bytes()
    return files


@contextlib.contextmanager
def listening() -> Iterator[tuple[int, list[bytes]]]:
    """A tiny HTTP server on the host's loopback, in a thread: its port and what it got."""
    import threading

    server = socket.create_server((HOST, 0))
    seen: list[bytes] = []

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                with conn:
                    seen.append(conn.recv(65536))
                    body = json.dumps({"ok": True}).encode()
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                        % (len(body), body)
                    )

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], seen
    finally:
        # Closing alone does not wake a thread blocked in accept(); shutting it down does.
        with contextlib.suppress(OSError):
            server.shutdown(socket.SHUT_RDWR)
        server.close()
        thread.join(5)


# --- the egress proxy's tests (test_proxy_*.py) --------------------------------------------


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """``port = await serve(handler)``: a TCP server on loopback; a handler's failure fails
    the test."""
    servers: list[asyncio.Server] = []
    handlers: list[asyncio.Task[None]] = []

    async def start(handler: Handler, tls: ssl.SSLContext | None = None) -> int:
        async def guarded(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                await asyncio.wait_for(handler(reader, writer), PROXY_WAIT)
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()

        def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            handlers.append(asyncio.create_task(guarded(reader, writer)))

        server = await asyncio.start_server(accept, "127.0.0.1", 0, ssl=tls)
        servers.append(server)
        port: int = server.sockets[0].getsockname()[1]
        return port

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()
    await asyncio.gather(*handlers)


@pytest.fixture
async def start_proxy(tmp_path: Path) -> AsyncIterator[StartProxy]:
    """``await start_proxy(upstream, allow, on_refused, **options)``, closed after the test
    (``models`` is ``MODELS`` unless given); nothing may reach the event loop's exception
    handler meanwhile."""
    proxies: list[EgressProxy] = []
    escaped: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _, context: escaped.append(context))

    async def start(
        upstream: Upstream | None = None,
        allow: Sequence[str] = (),
        on_refused: Callable[[str], None] | None = None,
        **options: Any,
    ) -> EgressProxy:
        upstream = upstream or Upstream(f"http://127.0.0.1:{free_port()}", {"x-api-key": KEY})
        path = tmp_path / f"egress{len(proxies)}.sock"
        options.setdefault("models", MODELS)
        proxy = EgressProxy(path, upstream, allow, on_refused=on_refused, **options)
        await proxy.start()
        proxies.append(proxy)
        return proxy

    try:
        yield start
        for proxy in proxies:
            await proxy.close()
    finally:
        loop.set_exception_handler(None)
    assert not escaped
