"""An agent's conversation with the CLI the runtime started, through the SDK's client.

The only module (with ``cli_process.py`` and ``agent_stream.py`` beside it) that imports
``claude_agent_sdk``: the runtime imports it once the CLI has started (``cli_launch.py``),
in a thread, so that the SDK's import runs beside the CLI's own start. A ``CliSession`` is
a ``ClaudeSDKClient`` over that running process: the client's control protocol (initialize,
permissions, hooks, the agent's in-process MCP server) on the CLI the harness started.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from anyio.abc import Process
from anyio.streams.text import TextReceiveStream, TextSendStream
from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    ClaudeSDKError,
    HookContext,
    HookMatcher,
)
from claude_agent_sdk._errors import ResultError
from claude_agent_sdk._internal._task_compat import spawn_detached
from claude_agent_sdk._internal.transport.subprocess_cli import SubprocessCLITransport
from claude_agent_sdk.types import (
    PermissionResultAllow,
    PermissionResultDeny,
    SyncHookJSONOutput,
    ToolPermissionContext,
)

from harness.runtime.agent_stream import (
    RunTracker,
    build_server,
    describe_result_error,
    message_to_json,
    retry_limit,
)
from harness.runtime.attachments import prompt_input
from harness.runtime.binding import Binding
from harness.runtime.cli_launch import CliOptions, end_cli
from harness.runtime.cli_process import cli_failed, prime
from harness.runtime.spec import SERVER_NAME, AgentControl, AgentSpec, RunIO, ToolUse
from harness.tasks.model import RESULT_SCHEMA


def session_options(
    cli: CliOptions, spec: AgentSpec, binding: Binding, stderr: Callable[[str], None]
) -> ClaudeAgentOptions:
    """The client's options for ``cli``: its flags (which the SDK would turn into the same
    command line, ``cli_command``) and the callbacks its control protocol calls."""
    harness_tools = set(spec.harness_tool_names)

    async def pre_tool_use(
        hook_input: Any, tool_use_id: str | None, _context: HookContext
    ) -> SyncHookJSONOutput:
        use = ToolUse(
            tool_use_id=tool_use_id or "",
            name=str(hook_input.get("tool_name", "")),
            input=dict(hook_input.get("tool_input") or {}),
        )
        await binding.on_tool_use(use)
        return {}

    async def can_use_tool(
        tool: str, tool_input: dict[str, Any], _context: ToolPermissionContext
    ) -> PermissionResultAllow | PermissionResultDeny:
        if tool in harness_tools:  # its access profile already decided
            return PermissionResultAllow()
        approval = await binding.tools.approve(binding.agent_id, tool, tool_input)
        if approval.allowed:
            return PermissionResultAllow()
        return PermissionResultDeny(message=approval.message)

    return ClaudeAgentOptions(
        # The same flags as ``cli``'s (``cli_command``): the SDK's own command line from
        # these is what a test compares the harness's with.
        system_prompt={
            "type": "preset",
            "preset": "claude_code",
            "append": cli.append_system_prompt,
        },
        tools=list(cli.tools) if cli.tools is not None else None,
        # Every call that needs permission comes to can_use_tool (whole-tool entries in
        # allowed_tools would skip it), whatever the role's permission mode.
        can_use_tool=can_use_tool,
        allowed_tools=[],
        disallowed_tools=list(cli.disallowed_tools),
        mcp_servers={SERVER_NAME: build_server(spec, binding)} if cli.harness_server else {},
        permission_mode=cli.permission_mode,
        max_turns=cli.max_turns,
        max_budget_usd=cli.max_budget_usd,
        model=cli.model,
        cwd=cli.cwd,
        output_format={"type": "json_schema", "schema": RESULT_SCHEMA},
        setting_sources=[],
        extra_args={} if cli.persist_session else {"no-session-persistence": None},
        env=dict(cli.env),
        settings=cli.settings,
        hooks={"PreToolUse": [HookMatcher(matcher=None, hooks=[pre_tool_use])]},
        stderr=stderr,
        cli_path=cli.cli_path,
    )


def run_tracker(
    control: AgentControl, model_env: Mapping[str, str], binding: Binding
) -> RunTracker:
    """What folds one run's messages into its outcome."""
    return RunTracker(
        control,
        # The limit as configured, even where the CLI is kept from seeing it.
        retry_limit=retry_limit(model_env),
        model_api=model_env.get("ANTHROPIC_BASE_URL") or None,
        spend=binding.spend,
    )


class _StartedTransport(SubprocessCLITransport):
    """The SDK's subprocess transport over a CLI already started (``start_cli``): its
    connect takes the process over instead of starting one; reading, writing and closing
    are the SDK's own."""

    def __init__(self, process: Process, options: ClaudeAgentOptions) -> None:
        super().__init__(prompt=_no_prompt(), options=options)
        self._started = process

    async def connect(self) -> None:
        if self._process is not None:
            return
        process = self._process = self._started
        if process.stdout is not None:
            self._stdout_stream = TextReceiveStream(process.stdout)
        if process.stderr is not None:
            self._stderr_stream = TextReceiveStream(process.stderr)
            self._stderr_task = spawn_detached(self._handle_stderr())
        if process.stdin is not None:
            self._stdin_stream = TextSendStream(process.stdin)
        self._ready = True


async def _no_prompt() -> AsyncIterator[dict[str, Any]]:
    return
    yield {}  # an empty stream: the client sends each prompt itself


class CliSession:
    """A started CLI under the SDK's client, for one agent (its ``binding``)."""

    def __init__(
        self, process: Process, cli: CliOptions, spec: AgentSpec, binding: Binding
    ) -> None:
        self.stderr_tail: deque[str] = deque(maxlen=5)
        self.binding = binding
        self._process = process
        options = session_options(cli, spec, binding, self.stderr_tail.append)
        self.client = ClaudeSDKClient(options, transport=_StartedTransport(process, options))

    def tracker(self, control: AgentControl, model_env: Mapping[str, str]) -> RunTracker:
        return run_tracker(control, model_env, self.binding)

    async def connect(self) -> str | None:
        """The client's control protocol begun; what failed, or None."""
        try:
            await self.client.connect()
        except ClaudeSDKError as exc:
            return cli_failed(exc, self.stderr_tail)
        return None

    async def prime(self) -> bool:
        return await prime(self.client, self.binding.hold)

    async def converse(
        self, spec: AgentSpec, control: AgentControl, io: RunIO, tracker: RunTracker
    ) -> None:
        """From the prompt to the result, on a connected CLI."""
        client = self.client
        stopped = False
        try:
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
            tracker.error = describe_result_error(exc)
        except ClaudeSDKError as exc:
            tracker.error = cli_failed(exc, self.stderr_tail)
        finally:
            control.attach(None)

    async def close(self) -> None:
        """The CLI ended and its pipes closed: the client's close (when it connected) ends
        the process but leaves its stdout (and an unread stderr) open; ``end_cli`` then
        closes them, and kills the process if the client could not end it (or never took
        it over)."""
        try:
            await self.client.disconnect()
        finally:
            await end_cli(self._process)

    @property
    def pid(self) -> int | None:
        """The CLI's process (its sandbox's launcher); None once it ended."""
        return self._process.pid if self._process.returncode is None else None

    async def ended(self) -> None:
        """Returns once the CLI's process has ended (killed, crashed or closed)."""
        await self._process.wait()
