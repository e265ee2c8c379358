"""The agent runtime: runs one agent to its structured result.

This is the only module that drives ``claude_agent_sdk``'s client. One ``ClaudeSDKClient``
per agent; a kill is ``interrupt()`` then ``disconnect()`` (about 50 ms, and the ``claude``
child is gone), never a task cancellation (which takes ~5 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    ClaudeSDKError,
    HookContext,
    HookMatcher,
)
from claude_agent_sdk._errors import ResultError
from claude_agent_sdk.types import (
    PermissionResultAllow,
    PermissionResultDeny,
    SyncHookJSONOutput,
    ToolPermissionContext,
)

from harness.clock import SYSTEM, Clock
from harness.errors import HarnessError
from harness.runtime.agent_stream import (
    CountedSpend,
    RunTracker,
    build_server,
    describe_result_error,
    message_to_json,
    retry_limit,
)
from harness.runtime.attachments import prompt_input
from harness.runtime.cli_process import CallHold, cli_failed, disconnect, prime, sdk_process
from harness.runtime.cli_state import CONFIG_DIR_ENV, login_folder, remove_session
from harness.runtime.orphans import bundled_cli, guarded_cli
from harness.runtime.spec import (
    SERVER_NAME,
    AgentControl,
    AgentSpec,
    Approval,
    RunIO,
    RunOutcome,
    ToolGateway,
    ToolReply,
    ToolUse,
    ToolUseSink,
)
from harness.sandbox.environment import allowed_names, blanked, launcher_names
from harness.sandbox.hosts import shown
from harness.sandbox.model_calls import model_policy
from harness.sandbox.runner import (
    MODEL_VARIABLES,
    PLACEHOLDER_KEY_SETTINGS,
    SandboxUnavailableError,
    check_sandbox,
    open_sandbox,
)
from harness.tasks.model import RESULT_SCHEMA

__all__ = ["ClaudeRuntime", "WarmAgent", "message_to_json"]

logger = logging.getLogger(__name__)

CLI_FIX = "reinstall claude-agent-sdk (its wheel bundles the CLI), or put `claude` on PATH"


def _outside_env(own: Mapping[str, str], pass_env: tuple[str, ...]) -> dict[str, str]:
    """The SDK hands the whole process environment to the CLI and only lets ``env`` override
    it: ``own`` (what the harness sets) over every variable not on the agents' allow-list
    overridden with nothing (``harness/sandbox/environment.py``). Agents run commands, and
    a command that prints its environment must not print the bot's tokens or other secrets.
    In the sandbox, its launcher passes on the allowed ones alone (``_sandboxed``)."""
    names = [*own, CONFIG_DIR_ENV]
    allowed = allowed_names(os.environ, harness_set=names, pass_env=pass_env, outside=True)
    return {**blanked(os.environ, allowed), **own}


class _NotYet:
    """A spare's gateway before it is given its dispatch: it makes no call before then."""

    async def call(self, agent_id: str, tool: str, args: Mapping[str, Any]) -> ToolReply:
        error = {"code": "INVALID_AGENT_STATE", "message": "no task yet", "suggestion": ""}
        return ToolReply({"error": error}, is_error=True)

    async def approve(self, agent_id: str, tool: str, args: Mapping[str, Any]) -> Approval:
        return Approval(False, "the agent has no task yet")


async def _no_tool_use(_use: ToolUse) -> None:
    return None


@dataclass
class Binding:
    """Whose agent the CLI is: its calls are made as ``agent_id`` through ``tools``. Set
    when it starts, or, for a spare, when it is given its dispatch."""

    agent_id: str
    tools: ToolGateway = field(default_factory=_NotYet)
    on_tool_use: ToolUseSink = _no_tool_use
    # Its model calls as its sandbox's proxy counted them.
    spend: CountedSpend = field(default_factory=CountedSpend)
    hold: CallHold = field(default_factory=CallHold)  # on for a spare's priming turn


@dataclass
class WarmAgent:
    """A CLI started ahead, in its sandbox, connected and waiting for its prompt; made for
    ``template`` (role, environment, tools, folder). One use: ``run_warm`` closes it."""

    template: AgentSpec
    client: ClaudeSDKClient
    binding: Binding
    stderr_tail: deque[str]
    stack: contextlib.AsyncExitStack
    model_env: Mapping[str, str]
    primed: bool = False  # its CLI's context and first turn were run while it waits (``prime``)

    async def close(self) -> None:
        try:
            await disconnect(self.client)
        finally:
            await self.stack.aclose()

    @property
    def pid(self) -> int | None:
        """The CLI's process (its sandbox's launcher); None once it ended."""
        process = sdk_process(self.client)
        return process.pid if process is not None and process.returncode is None else None

    async def ended(self) -> None:
        """Returns once the CLI's process has ended (killed, crashed or closed)."""
        if (process := sdk_process(self.client)) is not None:
            await process.wait()


class ClaudeRuntime:
    """Runs agents with the Claude Code CLI bundled in claude-agent-sdk.

    The CLI is started through a launcher that has the kernel kill it when the harness
    process dies, even by SIGKILL (``harness/runtime/orphans.py``); ``guard_children=False``
    runs the bare CLI (for measuring what the guard is worth). ``clock`` times the runs
    (their records' durations) and paces the sandbox proxy's rate limit."""

    def __init__(
        self,
        *,
        base_env: Mapping[str, str] | None = None,
        guard_children: bool = True,
        clock: Clock = SYSTEM,
        prime_spares: bool = True,
    ) -> None:
        # Extra environment for every child (of the process's, only the allowed pass).
        self._base_env = dict(base_env or {})
        # False: spares wait unprimed (``prime``), as `harness run`'s, whose prompt follows.
        self.prime_spares = prime_spares
        self._guard_children = guard_children
        self._clock = clock
        self._cli_path: str | None = None  # None: the SDK picks the bundled CLI itself

    async def _prepare_cli(self) -> None:
        if self._guard_children:  # written the first time (or again if it went), then a stat
            self._cli_path = await asyncio.to_thread(guarded_cli)

    def options_for(
        self, spec: AgentSpec, binding: Binding, stderr: Callable[[str], None]
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
            await binding.on_tool_use(use)
            return {}

        env = _outside_env(self._own_env(spec), spec.sandbox.pass_env)
        harness_tools = set(spec.harness_tool_names)

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
            mcp_servers={SERVER_NAME: build_server(spec, binding)} if spec.harness_tools else {},
            permission_mode="plan" if role.permission_mode == "plan" else "default",
            max_turns=role.max_turns,
            max_budget_usd=role.max_budget_usd,
            model=role.model,
            cwd=spec.cwd,
            output_format={"type": "json_schema", "schema": RESULT_SCHEMA},
            # No settings, hooks, permissions or CLAUDE.md from the worktree: an agent could
            # have written them there for the next agent to obey.
            setting_sources=[],
            extra_args={"no-session-persistence": None},  # the journal keeps it; none resumes
            env=env,
            hooks={"PreToolUse": [HookMatcher(matcher=None, hooks=[pre_tool_use])]},
            stderr=stderr,
            cli_path=self._cli_path,
        )

    def _own_env(self, spec: AgentSpec) -> dict[str, str]:
        """What the harness sets for an agent's CLI: the runtime's, the role's, the spec's."""
        return {**self._base_env, **spec.role.env, **spec.env}

    def _tracker(
        self, control: AgentControl, model_env: Mapping[str, str], binding: Binding
    ) -> RunTracker:
        return RunTracker(
            control,
            # The limit as configured, even where the CLI is kept from seeing it.
            retry_limit=retry_limit(model_env),
            model_api=model_env.get("ANTHROPIC_BASE_URL") or None,
            spend=binding.spend,
        )

    async def run(self, spec: AgentSpec, control: AgentControl, io: RunIO) -> RunOutcome:
        started = self._clock.monotonic()
        await self._prepare_cli()
        stderr_tail: deque[str] = deque(maxlen=5)
        binding = Binding(spec.agent_id, io.tools, io.on_tool_use)
        options = self.options_for(spec, binding, stderr_tail.append)
        model_env = {**os.environ, **self._base_env, **spec.env}  # as configured
        tracker = self._tracker(control, model_env, binding)
        login = await asyncio.to_thread(login_folder, model_env)
        try:
            async with self._sandboxed(spec, options, model_env, binding, login) as boxed:
                client = ClaudeSDKClient(boxed)
                try:
                    if await self._connect(client, stderr_tail, tracker):
                        await self._converse(client, spec, control, io, tracker, stderr_tail)
                finally:
                    await disconnect(client)
        except SandboxUnavailableError as exc:
            tracker.error = f"the agent's OS sandbox cannot start here: {exc.message}; {exc.fix}"
        finally:
            if login is not None and tracker.session_id:  # its transcript left the login's
                await asyncio.to_thread(remove_session, login, tracker.session_id)
        return tracker.outcome(int((self._clock.monotonic() - started) * 1000))

    async def warm(self, template: AgentSpec) -> WarmAgent:
        """A CLI for ``template``, started in its sandbox, connected, its first turn run
        ahead (``prime``): what every start pays before the prompt, paid ahead.
        SandboxUnavailableError where there is none (only sandboxed agents are kept warm),
        HarnessError when the CLI fails."""
        await self._prepare_cli()
        if not template.sandbox.enabled:
            raise SandboxUnavailableError("spares run in the OS sandbox only", fix="")
        await check_sandbox()
        stderr_tail: deque[str] = deque(maxlen=5)
        binding = Binding(template.agent_id)
        options = self.options_for(template, binding, stderr_tail.append)
        model_env = {**os.environ, **self._base_env, **template.env}
        stack = contextlib.AsyncExitStack()
        try:
            boxed = await stack.enter_async_context(
                self._sandboxed(template, options, model_env, binding, None)
            )
            client = ClaudeSDKClient(boxed)
            await client.connect()
            primed = self.prime_spares and await prime(client, binding.hold)
        except ClaudeSDKError as exc:
            await stack.aclose()
            raise HarnessError(
                cli_failed(exc, stderr_tail), fix="dispatches start the CLI anew meanwhile"
            ) from exc
        except BaseException:
            await stack.aclose()
            raise
        return WarmAgent(template, client, binding, stderr_tail, stack, model_env, primed)

    async def run_warm(
        self, warm: WarmAgent, spec: AgentSpec, control: AgentControl, io: RunIO
    ) -> RunOutcome:
        """Runs ``spec`` on a spare made for a template it fits: the spare becomes this
        agent (its calls are made as it from now on), is sent the prompt, and is closed
        at the end as any agent's CLI is."""
        started = self._clock.monotonic()
        warm.binding.agent_id = spec.agent_id
        warm.binding.tools = io.tools
        warm.binding.on_tool_use = io.on_tool_use
        tracker = self._tracker(control, warm.model_env, warm.binding)
        try:
            await self._converse(warm.client, spec, control, io, tracker, warm.stderr_tail)
        finally:
            await warm.close()
        return tracker.outcome(int((self._clock.monotonic() - started) * 1000))

    @staticmethod
    def _outside(
        spec: AgentSpec, options: ClaudeAgentOptions, login: Path | None
    ) -> ClaudeAgentOptions:
        """Outside the sandbox: the CLI writes in the folder its host gave the run, or a login's."""
        if login is not None:  # its session's files go there, then remove_session takes all
            return dataclasses.replace(options, extra_args={})
        if spec.cli_state is None:
            return options
        return dataclasses.replace(options, env={**options.env, CONFIG_DIR_ENV: spec.cli_state})

    @contextlib.asynccontextmanager
    async def _sandboxed(
        self,
        spec: AgentSpec,
        options: ClaudeAgentOptions,
        model_env: Mapping[str, str],
        binding: Binding,
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
        own = self._own_env(spec)
        allowed = allowed_names(
            [*os.environ, *own], harness_set=own, pass_env=spec.sandbox.pass_env, outside=False
        )
        # The model's variables are the bridge's to set; its home is its own and ends with
        # it: the CLI's folder is there.
        passed = launcher_names(
            allowed, fixed=spec.mount_env, withheld=(*MODEL_VARIABLES, CONFIG_DIR_ENV)
        )

        async def ask(host: str, port: int) -> bool:
            # A host not allowed is asked as a fetch of it: the role's WebFetch rules decide,
            # else its humans, and "Allow for this task" remembers the domain.
            # The host:port the connection would reach, exactly (IPv6 in brackets).
            url = f"https://{shown(host, port).removesuffix(':443')}/"
            use = {"url": url, "prompt": "a connection from the agent's sandbox"}
            return (await binding.tools.approve(binding.agent_id, "WebFetch", use)).allowed

        async with open_sandbox(
            cwd=spec.cwd,
            binds=spec.mounts,
            cli=cli,
            model_env=model_env,
            allow_hosts=spec.sandbox.network_allow,
            pass_env=passed,
            set_env=spec.mount_env,
            ask=ask,
            hidden=spec.hidden,
            # Its own model only, within its budget; every call counted, whoever made it.
            models=model_policy(spec.role.model, model_env),
            on_usage=binding.spend.add,
            budget_usd=spec.role.max_budget_usd,
            clock=self._clock,
            held=binding.hold,
        ) as box:
            yield dataclasses.replace(
                options,
                cli_path=box.cli_path,
                settings=PLACEHOLDER_KEY_SETTINGS,
                env={**options.env, **dict.fromkeys(MODEL_VARIABLES, "")},
            )

    @staticmethod
    async def _connect(
        client: ClaudeSDKClient, stderr_tail: deque[str], tracker: RunTracker
    ) -> bool:
        """Starts the CLI; False when it did not (the tracker says why)."""
        try:
            await client.connect()
        except ClaudeSDKError as exc:
            tracker.error = cli_failed(exc, stderr_tail)
            return False
        return True

    async def _converse(
        self,
        client: ClaudeSDKClient,
        spec: AgentSpec,
        control: AgentControl,
        io: RunIO,
        tracker: RunTracker,
        stderr_tail: deque[str],
    ) -> None:
        """From the prompt to the result, on a connected CLI."""
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
            tracker.error = cli_failed(exc, stderr_tail)
        finally:
            control.attach(None)
