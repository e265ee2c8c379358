"""The Claude Code CLI's command line and environment, and its start.

The harness starts the CLI itself, before the Claude SDK is imported, and hands the
running process to the SDK's client (``sdk_session.py``): the CLI's own start (about half
a second of loading) then runs on another core while the SDK imports (most of a second:
the MCP package's models). So this module builds what the SDK's subprocess transport would
run, without the SDK: the same arguments and the same environment, which a test checks
against the SDK's own for every option the harness sets."""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from harness.errors import HarnessError
from harness.runtime.spec import SERVER_NAME
from harness.tasks.model import RESULT_SCHEMA

if TYPE_CHECKING:
    from anyio.abc import Process

CLI_FIX = "reinstall claude-agent-sdk (its wheel bundles the CLI), or put `claude` on PATH"
# What the SDK sets for the CLI it starts: who started it, the SDK's version, and that the
# SDK reads its session-state frames.
ENTRYPOINT = "sdk-py"
SESSION_STATE_ENV = "CLAUDE_CODE_SDK_READS_SESSION_STATE"
# The SDK's variables that name an outer SDK session's app: not passed on.
_NOT_INHERITED = ("CLAUDECODE", "CLAUDE_AGENT_SDK_DERIVED_CLIENT_APP")


@dataclass(frozen=True)
class CliOptions:
    """What one agent's CLI is started with (the flags the harness sets; the rest is the
    CLI's default). ``env`` is set over the harness process's environment, as the SDK does."""

    cli_path: str
    cwd: str
    append_system_prompt: str
    tools: tuple[str, ...] | None = None  # None: Claude Code's default set
    disallowed_tools: tuple[str, ...] = ()
    max_turns: int | None = None
    max_budget_usd: float | None = None
    model: str | None = None
    permission_mode: Literal["default", "plan"] = "default"
    settings: str | None = None
    harness_server: bool = False  # the agent's own in-process MCP server
    # False: the CLI keeps no session of its own (the journal keeps it; none resumes).
    persist_session: bool = False
    env: Mapping[str, str] = field(default_factory=dict)


def cli_command(options: CliOptions) -> list[str]:
    """The CLI's arguments, in the SDK's order: it talks stream-JSON on stdin and stdout,
    asks the harness for every permission (``stdio``), answers in the result schema."""
    command = [options.cli_path, "--output-format", "stream-json", "--verbose"]
    command += ["--append-system-prompt", options.append_system_prompt]
    if options.tools is not None:
        command += ["--tools", ",".join(options.tools)]
    if options.max_turns:
        command += ["--max-turns", str(options.max_turns)]
    if options.max_budget_usd is not None:
        command += ["--max-budget-usd", str(options.max_budget_usd)]
    if options.disallowed_tools:
        command += ["--disallowedTools", ",".join(options.disallowed_tools)]
    if options.model:
        command += ["--model", options.model]
    command += ["--permission-prompt-tool", "stdio"]
    command += ["--permission-mode", options.permission_mode]
    if options.settings:
        command += ["--settings", options.settings]
    if options.harness_server:
        servers = {SERVER_NAME: {"type": "sdk", "name": SERVER_NAME}}
        command += ["--mcp-config", json.dumps({"mcpServers": servers})]
    # No settings, hooks, permissions or CLAUDE.md from the worktree: an agent could have
    # written them there for the next agent to obey.
    command.append("--setting-sources=")
    if not options.persist_session:
        command.append("--no-session-persistence")
    schema = json.dumps(RESULT_SCHEMA)
    return [*command, "--json-schema", schema, "--input-format", "stream-json"]


def cli_environment(options: CliOptions, environ: Mapping[str, str]) -> dict[str, str]:
    """The CLI's environment: ``environ`` (the harness process's) with ``options.env`` over
    it, and the SDK's own variables."""
    inherited = {name: value for name, value in environ.items() if name not in _NOT_INHERITED}
    env = {
        **inherited,
        "CLAUDE_CODE_ENTRYPOINT": ENTRYPOINT,
        **options.env,
        "CLAUDE_AGENT_SDK_VERSION": sdk_version(),
    }
    if not any(name.upper() == SESSION_STATE_ENV for name in env):
        env[SESSION_STATE_ENV] = "1"
    env["PWD"] = options.cwd
    return env


@functools.cache
def sdk_version() -> str:
    """The installed claude-agent-sdk's version, read from its metadata (not imported)."""
    return importlib.metadata.version("claude-agent-sdk")


class CliStartError(HarnessError):
    """The CLI's process could not be started."""


async def start_cli(options: CliOptions) -> Process:
    """The CLI started with ``options``, its stdin, stdout and stderr piped, waiting for
    the SDK's client to take it over. CliStartError, saying why, when it cannot start."""
    import anyio  # the SDK's own process library: its client takes this process over

    command = cli_command(options)
    env = cli_environment(options, os.environ)
    pipe = subprocess.PIPE
    try:
        return await anyio.open_process(
            command, stdin=pipe, stdout=pipe, stderr=pipe, cwd=options.cwd, env=env
        )
    except FileNotFoundError as exc:
        if not Path(options.cwd).exists():
            said = f"Working directory does not exist: {options.cwd}"
        else:
            said = f"Claude Code not found at: {options.cli_path}"
        raise CliStartError(said, fix=CLI_FIX) from exc
    except OSError as exc:
        raise CliStartError(f"Failed to start Claude Code: {exc}", fix=CLI_FIX) from exc


async def end_cli(process: Process) -> None:
    """A started CLI that no client holds (any more): killed if it runs, waited for, and
    its pipes closed."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    try:
        await process.wait()
    finally:
        close_pipes(process)


def close_pipes(process: Process) -> None:
    """Closes the loop's transport of ``process``, and so its pipes. anyio's ``aclose`` of
    a read stream does not close its pipe: while a process of its sandbox still holds one,
    it never ends, and the transport is left for the garbage collector to close, warning,
    at whatever later moment it runs."""
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    if transport is not None:
        transport.close()
