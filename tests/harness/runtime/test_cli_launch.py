"""The harness starts the Claude Code CLI itself, before the SDK imports, and hands the
process to the SDK's client: the CLI must get exactly what the SDK would have given it."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk._internal.transport.subprocess_cli import SubprocessCLITransport
from claude_agent_sdk.types import _configure_can_use_tool

from harness.config.roles import Role
from harness.permissions.rules import parse_rule
from harness.runtime.binding import Binding
from harness.runtime.claude import ClaudeRuntime
from harness.runtime.cli_launch import (
    CliOptions,
    CliStartError,
    cli_command,
    end_cli,
    start_cli,
)
from harness.runtime.sdk_session import session_options
from harness.runtime.spec import AgentSpec, ToolDeclaration
from harness.sandbox.runner import PLACEHOLDER_KEY_SETTINGS

pytestmark = pytest.mark.anyio

_PLAIN = Role(name="dev", display_name="Dev", category="c", prompt="You build.", source="x")
_TOOL = ToolDeclaration("report", "Reports.", {"type": "object", "properties": {}})

# Every option the harness sets, each way it can be set.
ROLES = {
    "defaults": _PLAIN,
    "every limit": dataclasses.replace(
        _PLAIN,
        model="claude-sonnet-4-5",
        tools=("Read", "Edit", "Bash"),
        max_turns=7,
        max_budget_usd=0.25,
        permission_mode="plan",
        deny=(parse_rule("Bash(rm:*)"), parse_rule("WebFetch"), parse_rule("Bash(a, b)")),
    ),
    "no tools": dataclasses.replace(_PLAIN, tools=(), permission_mode="acceptEdits"),
}


def _spec(role: Role, cwd: str, *, tools: bool) -> AgentSpec:
    return AgentSpec(
        agent_id="a1",
        role=role,
        prompt="hi",
        cwd=cwd,
        harness_tools=(_TOOL,) if tools else (),
        env={"HARNESS_AGENT": "a1"},
    )


async def _no_messages() -> AsyncIterator[dict[str, Any]]:
    return
    yield {}


def _sdk_command(cli: CliOptions, spec: AgentSpec) -> list[str]:
    options = _configure_can_use_tool(session_options(cli, spec, Binding("a1"), print))
    return SubprocessCLITransport(prompt=_no_messages(), options=options)._build_command()


@pytest.mark.parametrize("role", ROLES.values(), ids=ROLES.keys())
@pytest.mark.parametrize("tools", [True, False], ids=["harness tools", "none"])
@pytest.mark.parametrize("sandboxed", [True, False], ids=["sandboxed", "outside"])
def test_the_command_line_is_the_one_the_sdk_builds_from_the_same_options(
    role: Role, tools: bool, sandboxed: bool, tmp_path: Path
) -> None:
    spec = _spec(role, str(tmp_path), tools=tools)
    cli = ClaudeRuntime().cli_options(spec, "/opt/claude")
    if sandboxed:
        cli = dataclasses.replace(cli, settings=PLACEHOLDER_KEY_SETTINGS)
    else:
        cli = dataclasses.replace(cli, persist_session=True)

    assert cli_command(cli) == _sdk_command(cli, spec)


def _recording_cli(folder: Path) -> Path:
    """A stand-in CLI that writes down its arguments, folder and environment, then ends."""
    script = folder / "claude"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        "out = os.path.join(os.environ['RECORD_TO'], str(os.getpid()) + '.json')\n"
        "with open(out, 'w', encoding='utf-8') as f:\n"
        "    json.dump({'argv': sys.argv, 'cwd': os.getcwd(), 'env': dict(os.environ)}, f)\n",
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script


def _recorded(folder: Path, pid: int) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / f"{pid}.json").read_text(encoding="utf-8"))
    return data


@pytest.mark.subprocess
async def test_the_cli_gets_the_arguments_folder_and_environment_the_sdk_would_give_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = tmp_path / "records"
    records.mkdir()
    monkeypatch.setenv("RECORD_TO", str(records))
    # What the SDK leaves out of what a CLI inherits, and what it sets over the rest.
    monkeypatch.setenv("CLAUDECODE", "1")
    monkeypatch.setenv("CLAUDE_CODE_ENTRYPOINT", "outer")
    work = tmp_path / "work"
    work.mkdir()
    spec = _spec(ROLES["every limit"], str(work), tools=True)
    cli = ClaudeRuntime(base_env={"FROM_HARNESS": "yes"}).cli_options(
        spec, str(_recording_cli(tmp_path))
    )
    cli = dataclasses.replace(cli, env={**cli.env, "RECORD_TO": str(records)})

    ours = await start_cli(cli)
    try:
        async with asyncio.timeout(30):
            await ours.wait()  # the stand-in ends once it has written its record
    finally:
        await end_cli(ours)
    mine = _recorded(records, ours.pid)
    sdk = SubprocessCLITransport(
        prompt=_no_messages(),
        options=_configure_can_use_tool(session_options(cli, spec, Binding("a1"), print)),
    )
    await sdk.connect()
    assert sdk._process is not None
    pid = sdk._process.pid
    try:
        async with asyncio.timeout(30):
            await sdk._process.wait()
    finally:
        await sdk.close()
    theirs = _recorded(records, pid)

    assert mine["argv"] == theirs["argv"]
    assert mine["cwd"] == theirs["cwd"] == str(work)
    assert mine["env"] == theirs["env"]
    assert mine["env"]["FROM_HARNESS"] == "yes" and not mine["env"].get("CLAUDECODE")
    assert mine["env"]["CLAUDE_CODE_ENTRYPOINT"] == "sdk-py"


async def test_a_cli_that_cannot_start_says_why(tmp_path: Path) -> None:
    spec = _spec(_PLAIN, str(tmp_path / "gone"), tools=False)
    missing_folder = ClaudeRuntime().cli_options(spec, str(_recording_cli(tmp_path)))
    with pytest.raises(CliStartError, match=r"Working directory does not exist: .*gone"):
        await start_cli(missing_folder)

    no_cli = dataclasses.replace(missing_folder, cwd=str(tmp_path), cli_path="/nowhere/claude")
    with pytest.raises(CliStartError, match="Claude Code not found at: /nowhere/claude"):
        await start_cli(no_cli)


def _printed_by(code: str) -> str:
    """What ``code`` prints, run by a fresh interpreter (nothing imported before it)."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=os.environ,
        timeout=120,
    )
    return done.stdout


@pytest.mark.subprocess
def test_the_runtime_starts_a_cli_before_the_sdk_is_imported() -> None:
    # The CLI's start (about half a second) runs beside the SDK's import only if loading
    # the runtime and starting a CLI import nothing of the SDK.
    code = (
        "import sys\n"
        "import harness.runtime.claude, harness.runtime.cli_launch, harness.opening\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('claude_agent_sdk', 'mcp')))"
    )
    assert _printed_by(code).strip() == "[]"


@pytest.mark.subprocess
def test_a_run_that_starts_while_the_sdk_imports_waits_for_the_whole_of_it() -> None:
    # The first run's CLI imports the SDK's side in a thread; a second run starting while
    # that import is under way (the module half made) must get the whole module.
    code = """
import asyncio, sys
from harness.runtime.claude import sdk_session_module

async def main():
    first = asyncio.ensure_future(sdk_session_module())
    async with asyncio.timeout(60):
        while "harness.runtime.sdk_session" not in sys.modules:
            await asyncio.sleep(0.001)
    second = await sdk_session_module()
    print(hasattr(second, "CliSession"), (await first) is second)

asyncio.run(main())
"""
    assert _printed_by(code).split() == ["True", "True"]
