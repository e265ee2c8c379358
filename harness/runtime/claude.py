"""The agent runtime: runs one agent to its structured result.

This is the only module that drives ``claude_agent_sdk``'s client. One ``ClaudeSDKClient``
per agent; a kill is ``interrupt()`` then ``disconnect()`` (about 50 ms, and the ``claude``
child is gone), never a task cancellation (which takes ~5 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import mcp.types as mt
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    ClaudeSDKError,
    HookContext,
    HookMatcher,
    Message,
    ResultMessage,
    SystemMessage,
    TextBlock,
    ToolUseBlock,
)
from claude_agent_sdk._errors import ResultError
from claude_agent_sdk.types import (
    McpSdkServerConfig,
    PermissionResultAllow,
    PermissionResultDeny,
    SyncHookJSONOutput,
    ToolPermissionContext,
)
from mcp.server import Server

from harness.runtime.attachments import prompt_input
from harness.runtime.cli_state import CONFIG_DIR_ENV, login_folder, remove_session
from harness.runtime.orphans import bundled_cli, guarded_cli
from harness.runtime.spec import (
    MODEL_API_RETRIES_ENV,
    SERVER_NAME,
    AgentControl,
    AgentSpec,
    RunIO,
    RunOutcome,
    ToolGateway,
    ToolUse,
    ToolUseSink,
)
from harness.sandbox.runner import (
    MODEL_VARIABLES,
    PLACEHOLDER_KEY_SETTINGS,
    SandboxUnavailableError,
    check_sandbox,
    open_sandbox,
)
from harness.tasks.journal import api_retry_cause, api_retry_in
from harness.tasks.model import RESULT_SCHEMA, AgentResult

logger = logging.getLogger(__name__)

CLI_FIX = "reinstall claude-agent-sdk (its wheel bundles the CLI), or put `claude` on PATH"


def _withheld(environ: Mapping[str, str], patterns: tuple[str, ...]) -> dict[str, str]:
    """The SDK hands the whole process environment to the CLI and only lets ``env`` override
    it: what an agent must not see is overridden with nothing. Agents run commands, and a
    command that prints its environment must not print the bot's tokens or other secrets."""
    return {name: "" for name in environ if any(fnmatchcase(name, p) for p in patterns)}


def message_to_json(message: Message) -> dict[str, Any]:
    """An SDK message as a JSON-ready dict for the journal."""
    body = dataclasses.asdict(message) if dataclasses.is_dataclass(message) else {}
    return {"type": type(message).__name__, **body}


class ClaudeRuntime:
    """Runs agents with the Claude Code CLI bundled in claude-agent-sdk.

    The CLI is started through a launcher that has the kernel kill it when the harness
    process dies, even by SIGKILL (``harness/runtime/orphans.py``); ``guard_children=False``
    runs the bare CLI (for measuring what the guard is worth)."""

    def __init__(
        self, *, base_env: Mapping[str, str] | None = None, guard_children: bool = True
    ) -> None:
        # Extra environment for every child (the process environment passes through anyway).
        self._base_env = dict(base_env or {})
        self._guard_children = guard_children
        self._cli_path: str | None = None  # None: the SDK picks the bundled CLI itself

    async def _prepare_cli(self) -> None:
        if self._guard_children and self._cli_path is None:
            # Blocking the first time only: the launcher may have to be written.
            self._cli_path = await asyncio.to_thread(guarded_cli)

    def options_for(
        self,
        spec: AgentSpec,
        tools: ToolGateway,
        on_tool_use: ToolUseSink,
        stderr: Callable[[str], None],
    ) -> ClaudeAgentOptions:
        role = spec.role

        async def pre_tool_use(
            hook_input: Any, tool_use_id: str | None, _context: HookContext
        ) -> SyncHookJSONOutput:
            use = ToolUse(
                tool_use_id=tool_use_id or "",
                name=str(hook_input.get("tool_name", "")),
                input=dict(hook_input.get("tool_input") or {}),
            )
            await on_tool_use(use)
            return {}

        env = {**self._base_env, **spec.env, **_withheld(os.environ, spec.withhold_env)}
        harness_tools = set(spec.harness_tool_names)

        async def can_use_tool(
            tool: str, tool_input: dict[str, Any], _context: ToolPermissionContext
        ) -> PermissionResultAllow | PermissionResultDeny:
            if tool in harness_tools:  # its access profile already decided
                return PermissionResultAllow()
            approval = await tools.approve(spec.agent_id, tool, tool_input)
            if approval.allowed:
                return PermissionResultAllow()
            return PermissionResultDeny(message=approval.message)

        return ClaudeAgentOptions(
            system_prompt={"type": "preset", "preset": "claude_code", "append": role.prompt},
            tools=list(role.tools) if role.tools is not None else None,
            # Every call that needs permission comes to can_use_tool (whole-tool entries in
            # allowed_tools would skip it), whatever the role's permission mode: the CLI runs
            # in its default mode and the harness applies the role's (tools/approvals.py), so
            # no edit or command is decided without the harness, its deny rules and its audit.
            can_use_tool=can_use_tool,
            allowed_tools=[],
            # Deny rules hold in the CLI too, before it would even ask (the SDK joins them
            # with commas: a rule holding one stays with the harness's own deny check).
            disallowed_tools=[rule.text for rule in role.deny if "," not in rule.text],
            mcp_servers={SERVER_NAME: build_server(spec, tools)} if spec.harness_tools else {},
            permission_mode="plan" if role.permission_mode == "plan" else "default",
            max_turns=role.max_turns,
            max_budget_usd=role.max_budget_usd,
            model=role.model,
            cwd=spec.cwd,
            output_format={"type": "json_schema", "schema": RESULT_SCHEMA},
            # No settings, hooks, permissions or CLAUDE.md from the worktree: an agent could
            # have written them there for the next agent to obey.
            setting_sources=[],
            env=env,
            hooks={"PreToolUse": [HookMatcher(matcher=None, hooks=[pre_tool_use])]},
            stderr=stderr,
            cli_path=self._cli_path,
        )

    async def run(self, spec: AgentSpec, control: AgentControl, io: RunIO) -> RunOutcome:
        started = time.monotonic()
        await self._prepare_cli()
        stderr_tail: deque[str] = deque(maxlen=5)
        options = self.options_for(spec, io.tools, io.on_tool_use, stderr_tail.append)
        model_env = {**os.environ, **self._base_env, **spec.env}  # as configured
        tracker = _RunTracker(
            control,
            # The limit as configured, even where the CLI is kept from seeing it.
            retry_limit=_retry_limit(model_env),
            model_api=model_env.get("ANTHROPIC_BASE_URL") or None,
        )
        login = await asyncio.to_thread(login_folder, model_env)
        try:
            async with self._sandboxed(spec, options, model_env, io.tools, login) as boxed:
                await self._drive(boxed, spec, control, io, tracker, stderr_tail)
        except SandboxUnavailableError as exc:
            tracker.error = f"the agent's OS sandbox cannot start here: {exc.message}; {exc.fix}"
        finally:
            if login is not None and tracker.session_id:  # its transcript left the login's
                await asyncio.to_thread(remove_session, login, tracker.session_id)
        return tracker.outcome(int((time.monotonic() - started) * 1000))

    @staticmethod
    def _outside(
        spec: AgentSpec, options: ClaudeAgentOptions, login: Path | None
    ) -> ClaudeAgentOptions:
        """The options of a run outside the sandbox: the CLI writes in the folder its host
        gave this run, unless the model is reached through a login kept in its own."""
        if spec.cli_state is None or login is not None:
            return options
        return dataclasses.replace(options, env={**options.env, CONFIG_DIR_ENV: spec.cli_state})

    @contextlib.asynccontextmanager
    async def _sandboxed(
        self,
        spec: AgentSpec,
        options: ClaudeAgentOptions,
        model_env: Mapping[str, str],
        tools: ToolGateway,
        login: Path | None,
    ) -> AsyncIterator[ClaudeAgentOptions]:
        """The options that start the CLI in the agent's sandbox, for as long as it runs.
        An agent that only reads runs without one where bubblewrap cannot start; one that
        can write or run commands does not start (SandboxUnavailableError)."""
        if not spec.sandbox.enabled:
            logger.warning(
                "agent %s runs without the OS sandbox: config.yaml says `sandbox: off`",
                spec.agent_id,
            )
            yield self._outside(spec, options, login)
            return
        try:
            await check_sandbox()
        except SandboxUnavailableError as exc:
            if spec.role.writes:
                raise
            logger.warning(
                "agent %s only reads: it runs without the OS sandbox (%s)",
                spec.agent_id,
                exc.message,
            )
            yield self._outside(spec, options, login)
            return
        cli = await asyncio.to_thread(bundled_cli)
        if cli is None:
            raise SandboxUnavailableError("the Claude Code CLI was not found", fix=CLI_FIX)
        # Its home is its own and ends with it: the CLI's folder is there.
        hidden = {*MODEL_VARIABLES, CONFIG_DIR_ENV, *_withheld(model_env, spec.withhold_env)}

        async def ask(host: str, port: int) -> bool:
            # A host not allowed is asked as a fetch of it: the role's WebFetch rules decide,
            # else its humans, and "Allow for this task" remembers the domain.
            url = f"https://{host}/" if port == 443 else f"https://{host}:{port}/"
            use = {"url": url, "prompt": "a connection from the agent's sandbox"}
            return (await tools.approve(spec.agent_id, "WebFetch", use)).allowed

        async with open_sandbox(
            cwd=spec.cwd,
            binds=spec.mounts,
            cli=cli,
            model_env=model_env,
            allow_hosts=spec.sandbox.network_allow,
            unset_env=sorted(hidden),
            set_env=spec.mount_env,
            ask=ask,
            hidden=spec.hidden,
        ) as box:
            yield dataclasses.replace(
                options,
                cli_path=box.cli_path,
                settings=PLACEHOLDER_KEY_SETTINGS,
                env={**options.env, **dict.fromkeys(MODEL_VARIABLES, "")},
            )

    async def _drive(
        self,
        options: ClaudeAgentOptions,
        spec: AgentSpec,
        control: AgentControl,
        io: RunIO,
        tracker: _RunTracker,
        stderr_tail: deque[str],
    ) -> None:
        client = ClaudeSDKClient(options)
        stopped = False
        try:
            await client.connect()
            control.attach(client.interrupt)
            if not control.kill_requested:
                # The attached images go with the prompt, in its first message.
                await client.query(prompt_input(spec.prompt, spec.attachments))
                async for message in client.receive_response():
                    io.on_message(message_to_json(message))
                    tracker.observe(message)
                    if tracker.over_retry_limit and not stopped:
                        stopped = True  # a CLI that retries past the limit: stop it now
                        await client.interrupt()
        except ResultError as exc:
            tracker.error = _describe_result_error(exc)
        except ClaudeSDKError as exc:
            tracker.error = f"the Claude Code CLI failed: {exc}"
            if stderr_tail:
                tracker.error += " (stderr: " + " | ".join(s.strip() for s in stderr_tail) + ")"
        finally:
            control.attach(None)
            await client.disconnect()


def _retry_limit(env: Mapping[str, str]) -> int | None:
    """The model API retries an agent may make (modelApiRetries, given to the CLI too)."""
    value = env.get(MODEL_API_RETRIES_ENV, "").strip()
    return int(value) if value.isdigit() else None


class _RunTracker:
    """Folds the message stream into an outcome. Each retry notice of the CLI (its model API
    call failed) shows at once as the agent's activity; one past ``retry_limit`` means the CLI
    did not honour the limit, and the run is to be stopped (``over_retry_limit``)."""

    def __init__(
        self,
        control: AgentControl,
        *,
        retry_limit: int | None = None,
        model_api: str | None = None,  # ANTHROPIC_BASE_URL as the CLI sees it, if set
    ) -> None:
        self.control = control
        self.retry_limit = retry_limit
        self.model_api = model_api
        self.over_retry_limit = False
        self.last_text: str | None = None
        self.result_message: ResultMessage | None = None
        self.error: str | None = None
        # The CLI's last retry notice of a failing model API call (the orchestrator shows
        # each as progress); None again once the model answers.
        self.last_retry: dict[str, Any] | None = None
        self.api_error: str | None = None  # the CLI's "API Error: ..." once it gave up
        self.session_id: str | None = None

    def observe(self, message: Message) -> None:
        if isinstance(message, AssistantMessage):
            texts = [b.text for b in message.content if isinstance(b, TextBlock) and b.text]
            if message.error is None:  # the model answered
                self.last_retry = None
            else:  # the CLI's own "API Error: ..." when it gives up on the model API
                self.api_error = "\n".join(texts) or message.error
            if texts:
                self.last_text = "\n".join(texts)
            tools = [b.name for b in message.content if isinstance(b, ToolUseBlock)]
            if tools:
                self.control.activity = f"using {tools[-1]}"
            elif texts:
                self.control.activity = "writing"
        elif isinstance(message, ResultMessage):
            self.result_message = message
            self.session_id = message.session_id or self.session_id
        elif isinstance(message, SystemMessage) and message.subtype == "init":
            self.session_id = str(message.data.get("session_id") or "") or None
        elif isinstance(message, SystemMessage) and message.subtype == "api_retry":
            self.last_retry = message.data
            self.control.activity = api_retry_in(message_to_json(message)) or "retrying"
            attempt = message.data.get("attempt")
            if self.retry_limit is not None and isinstance(attempt, int):
                self.over_retry_limit = self.over_retry_limit or attempt > self.retry_limit

    def _unreachable(self, retry: dict[str, Any], error: str) -> str:
        retries = retry.get("attempt", "?")
        said = f"The CLI said: {error}"
        if self.over_retry_limit and self.retry_limit is not None:
            retries = self.retry_limit
            tried = f"{retry.get('attempt')}/{retry.get('max_retries')}"
            said = f"The CLI went on retrying ({tried}) and was stopped."
        cause = api_retry_cause(retry)
        if self.model_api:
            cause += f" {'to' if cause == 'no connection' else 'from'} {self.model_api}"
        return (
            f"the model API was unreachable after {retries} "
            f"{'retry' if retries == 1 else 'retries'} ({cause}; the limit is modelApiRetries "
            f"in config.yaml): check ANTHROPIC_BASE_URL, the network and the API's status. {said}"
        )

    def outcome(self, duration_ms: int) -> RunOutcome:
        rm = self.result_message
        base = RunOutcome(
            status="completed",
            result=AgentResult.from_json(rm.structured_output) if rm is not None else None,
            last_text=self.last_text,
            cost_usd=rm.total_cost_usd if rm is not None else None,
            turns=rm.num_turns if rm is not None else None,
            duration_ms=rm.duration_ms if rm is not None and rm.duration_ms else duration_ms,
        )
        if self.control.kill_reason is not None:
            return dataclasses.replace(base, status="killed", error=self.control.kill_reason)
        error = self.error
        if error is None and rm is not None and rm.is_error:
            error = _describe_result(rm.subtype, rm.errors, rm.result)
        if error is None and base.result is None:
            error = (
                "the agent ended without a structured result (it never called "
                "StructuredOutput); its last text is kept"
                if rm is not None
                else "the agent ended without a result message"
            )
        if error is not None and self.last_retry is not None and base.result is None:
            error = self._unreachable(self.last_retry, self.api_error or error)
        if error is not None:
            return dataclasses.replace(base, status="failed", error=error)
        return base


def _describe_result(subtype: str | None, errors: list[str] | None, text: str | None) -> str:
    reasons = {
        "error_max_turns": "it reached the role's maxTurns limit",
        "error_max_budget_usd": "it reached the role's maxBudgetUsd limit",
        "error_max_structured_output_retries": (
            "its structured result did not match the schema after 5 tries"
        ),
        "error_during_execution": "the run failed during execution",
    }
    reason = reasons.get(subtype or "", f"the run ended with {subtype}")
    details = "; ".join(e for e in (errors or []) if e) or (text or "")
    return f"{reason}: {details}" if details else reason


def _describe_result_error(exc: ResultError) -> str:
    return _describe_result(exc.subtype, exc.errors, exc.result)


def build_server(spec: AgentSpec, tools: ToolGateway) -> McpSdkServerConfig:
    """The agent's own in-process ``harness`` MCP server: it offers the spec's tools and
    forwards each call to the gateway in this agent's name, so the caller is never guessed."""
    offered = [
        mt.Tool(name=t.name, description=t.description, input_schema=dict(t.input_schema))
        for t in spec.harness_tools
    ]

    async def on_list_tools(
        _ctx: Any, _params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        return mt.ListToolsResult(tools=offered)

    async def on_call_tool(_ctx: Any, params: mt.CallToolRequestParams) -> mt.CallToolResult:
        reply = await tools.call(spec.agent_id, params.name, params.arguments or {})
        text = json.dumps(reply.payload, ensure_ascii=False)
        return mt.CallToolResult(
            content=[mt.TextContent(type="text", text=text)], is_error=reply.is_error
        )

    server: Server[Any] = Server(
        SERVER_NAME, version="1.0.0", on_list_tools=on_list_tools, on_call_tool=on_call_tool
    )
    return McpSdkServerConfig(type="sdk", name=SERVER_NAME, instance=server)
