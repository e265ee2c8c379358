"""The agent runtime: runs one agent to its structured result.

Each agent's CLI is started here (``cli_launch.py``, in its sandbox) before the Claude SDK is
imported, then driven through one ``ClaudeSDKClient`` (``sdk_session.py``, the only module
that drives the SDK's client). A kill is ``interrupt()`` then ``disconnect()`` (about 50 ms,
and the ``claude`` child is gone), never a task cancellation (which takes ~5 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib
import logging
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from harness.clock import SYSTEM, Clock
from harness.errors import HarnessError
from harness.runtime.binding import Binding
from harness.runtime.cli_launch import CLI_FIX, CliOptions, CliStartError, end_cli, start_cli
from harness.runtime.cli_state import CONFIG_DIR_ENV, login_folder, remove_session
from harness.runtime.orphans import bundled_cli, guarded_cli
from harness.runtime.spec import AgentControl, AgentSpec, RunIO, RunOutcome
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

if TYPE_CHECKING:
    from harness.runtime.agent_stream import RunTracker
    from harness.runtime.sdk_session import CliSession

__all__ = ["ClaudeRuntime", "WarmAgent", "sdk_session_module"]

logger = logging.getLogger(__name__)

_SESSION_MODULE = "harness.runtime.sdk_session"
_imported: dict[str, ModuleType] = {}  # once whole


def _outside_env(own: Mapping[str, str], pass_env: tuple[str, ...]) -> dict[str, str]:
    """The CLI gets the whole process environment with only ``env`` over it: ``own`` (what
    the harness sets) over every variable not on the agents' allow-list overridden with
    nothing (``harness/sandbox/environment.py``). Agents run commands, and a command that
    prints its environment must not print the bot's tokens or other secrets. In the
    sandbox, its launcher passes on the allowed ones alone (``_launch``)."""
    names = [*own, CONFIG_DIR_ENV]
    allowed = allowed_names(os.environ, harness_set=names, pass_env=pass_env, outside=True)
    return {**blanked(os.environ, allowed), **own}


async def sdk_session_module() -> ModuleType:
    """``sdk_session`` (and the Claude SDK with it), imported in a thread the first time:
    most of a second, which the event loop keeps serving through, and which a CLI started
    just before spends starting. Each caller meanwhile waits for the whole module (the
    import's lock), never a half-imported one."""
    if (module := _imported.get(_SESSION_MODULE)) is None:
        module = await asyncio.to_thread(importlib.import_module, _SESSION_MODULE)
        _imported[_SESSION_MODULE] = module
    return module


async def _run_tracker(
    control: AgentControl, model_env: Mapping[str, str], binding: Binding
) -> RunTracker:
    tracker: RunTracker = (await sdk_session_module()).run_tracker(control, model_env, binding)
    return tracker


@dataclass
class WarmAgent:
    """A CLI started ahead, in its sandbox, connected and waiting for its prompt; made for
    ``template`` (role, environment, tools, folder). One use: ``run_warm`` closes it."""

    template: AgentSpec
    session: CliSession
    stack: contextlib.AsyncExitStack  # the session, then its sandbox, closed in that order
    model_env: Mapping[str, str]
    primed: bool = False  # its CLI's context and first turn were run while it waits (``prime``)

    @property
    def binding(self) -> Binding:
        return self.session.binding

    async def close(self) -> None:
        await self.stack.aclose()

    @property
    def pid(self) -> int | None:
        """The CLI's process (its sandbox's launcher); None once it ended."""
        return self.session.pid

    async def ended(self) -> None:
        """Returns once the CLI's process has ended (killed, crashed or closed)."""
        await self.session.ended()


class ClaudeRuntime:
    """Runs agents with the Claude Code CLI bundled in claude-agent-sdk.

    Outside the OS sandbox the CLI is started through a launcher that has the kernel kill
    it when the harness process dies, even by SIGKILL (``harness/runtime/orphans.py``; in
    the sandbox, bubblewrap's ``--die-with-parent`` does); ``guard_children=False`` runs the
    bare CLI (for measuring what the guard is worth). ``clock`` times the runs
    (their records' durations) and paces the sandbox proxy's rate limit. The runtime starts
    each CLI itself (``cli_launch.py``) and only then has the SDK's client take it over
    (``sdk_session.py``): this module does not import the SDK."""

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

    def _cli_path(self) -> str | None:
        """The CLI to start outside a sandbox: its guarding launcher, else the bare CLI.
        Blocking the first time (it may write the launcher), then cached."""
        return (guarded_cli() if self._guard_children else None) or bundled_cli()

    def cli_options(self, spec: AgentSpec, cli_path: str) -> CliOptions:
        """What the agent's CLI is started with, outside a sandbox (``_launch`` makes the
        sandbox's of them)."""
        role = spec.role
        return CliOptions(
            cli_path=cli_path,
            cwd=spec.cwd,
            append_system_prompt=role.prompt,
            tools=role.tools,
            # Deny rules hold in the CLI too, before it would even ask (the flag joins them
            # with commas: a rule holding one stays with the harness's own deny check).
            disallowed_tools=tuple(rule.text for rule in role.deny if "," not in rule.text),
            max_turns=role.max_turns,
            max_budget_usd=role.max_budget_usd,
            model=role.model,
            # The CLI runs in its default mode and the harness applies the role's
            # (tools/approvals.py): every call that needs permission comes to the harness.
            permission_mode="plan" if role.permission_mode == "plan" else "default",
            harness_server=bool(spec.harness_tools),
            env=_outside_env(self._own_env(spec), spec.sandbox.pass_env),
        )

    def _own_env(self, spec: AgentSpec) -> dict[str, str]:
        """What the harness sets for an agent's CLI: the runtime's, the role's, the spec's."""
        return {**self._base_env, **spec.role.env, **spec.env}

    async def run(self, spec: AgentSpec, control: AgentControl, io: RunIO) -> RunOutcome:
        started = self._clock.monotonic()
        binding = Binding(spec.agent_id, io.tools, io.on_tool_use)
        model_env = {**os.environ, **self._base_env, **spec.env}  # as configured
        login = await asyncio.to_thread(login_folder, model_env)
        tracker: RunTracker | None = None
        failed: str | None = None
        try:
            async with self._started(spec, model_env, binding, login) as session:
                tracker = session.tracker(control, model_env)
                if (failed := await session.connect()) is None:
                    await session.converse(spec, control, io, tracker)
        except SandboxUnavailableError as exc:
            failed = f"the agent's OS sandbox cannot start here: {exc.message}; {exc.fix}"
        except CliStartError as exc:
            failed = f"the Claude Code CLI failed: {exc.message}"
        finally:
            if login is not None and tracker is not None and tracker.session_id:
                # Its transcript left the login's folder.
                await asyncio.to_thread(remove_session, login, tracker.session_id)
        if tracker is None:
            tracker = await _run_tracker(control, model_env, binding)
        if failed is not None:
            tracker.error = failed
        return tracker.outcome(int((self._clock.monotonic() - started) * 1000))

    async def warm(self, template: AgentSpec) -> WarmAgent:
        """A CLI for ``template``, started in its sandbox, connected, its first turn run
        ahead (``prime``): what every start pays before the prompt, paid ahead.
        SandboxUnavailableError where there is none (only sandboxed agents are kept warm),
        HarnessError when the CLI fails."""
        if not template.sandbox.enabled:
            raise SandboxUnavailableError("spares run in the OS sandbox only", fix="")
        await check_sandbox()
        binding = Binding(template.agent_id)
        model_env = {**os.environ, **self._base_env, **template.env}
        stack = contextlib.AsyncExitStack()
        try:
            session = await stack.enter_async_context(
                self._started(template, model_env, binding, None)
            )
            if (failed := await session.connect()) is not None:
                raise HarnessError(failed, fix="dispatches start the CLI anew meanwhile")
            primed = self.prime_spares and await session.prime()
        except BaseException:
            await stack.aclose()
            raise
        return WarmAgent(template, session, stack, model_env, primed)

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
        tracker = warm.session.tracker(control, warm.model_env)
        try:
            await warm.session.converse(spec, control, io, tracker)
        finally:
            await warm.close()
        return tracker.outcome(int((self._clock.monotonic() - started) * 1000))

    @contextlib.asynccontextmanager
    async def _started(
        self,
        spec: AgentSpec,
        model_env: Mapping[str, str],
        binding: Binding,
        login: Path | None,
    ) -> AsyncIterator[CliSession]:
        """The agent's CLI started (in its sandbox), then, once the SDK has imported beside
        its start, under the SDK's client; ended with its sandbox at the end."""
        async with self._launch(spec, model_env, binding, login) as cli:
            process = await start_cli(cli)
            session: CliSession | None = None
            try:
                module = await sdk_session_module()
                session = module.CliSession(process, cli, spec, binding)
                yield session
            finally:
                if session is not None:
                    await session.close()
                else:  # cut short before the client had it
                    await end_cli(process)

    async def _outside(self, spec: AgentSpec, login: Path | None) -> CliOptions:
        """Outside the sandbox: the CLI writes in the folder its host gave the run, or a login's."""
        cli_path = await asyncio.to_thread(self._cli_path)
        if cli_path is None:
            raise CliStartError("the Claude Code CLI was not found", fix=CLI_FIX)
        options = self.cli_options(spec, cli_path)
        if login is not None:  # its session's files go there, then remove_session takes all
            return dataclasses.replace(options, persist_session=True)
        if spec.cli_state is None:
            return options
        return dataclasses.replace(options, env={**options.env, CONFIG_DIR_ENV: spec.cli_state})

    @contextlib.asynccontextmanager
    async def _launch(
        self,
        spec: AgentSpec,
        model_env: Mapping[str, str],
        binding: Binding,
        login: Path | None,
    ) -> AsyncIterator[CliOptions]:
        """What starts the CLI in the agent's sandbox, for as long as it runs. An agent
        that only reads runs without one where bubblewrap cannot start; one that can
        write or run commands does not start (SandboxUnavailableError)."""
        if not spec.sandbox.enabled:
            logger.warning(
                "agent %s runs without the OS sandbox: config.yaml says `sandbox: off`",
                spec.agent_id,
            )
            yield await self._outside(spec, login)
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
            yield await self._outside(spec, login)
            return
        cli = await asyncio.to_thread(bundled_cli)
        if cli is None:
            raise SandboxUnavailableError("the Claude Code CLI was not found", fix=CLI_FIX)
        options = self.cli_options(spec, cli)
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
