"""What the Claude Code CLI writes during a run (its transcript, its state) stays under the
harness's data folder and goes when the run ends: nothing lands in the home's ``~/.claude``.
Real CLI against the scripted model, in and out of the OS sandbox."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from harness.cli.offline import scripted_env
from harness.config.roles import Role
from harness.config.settings import SandboxSettings, WorkspaceSettings
from harness.runtime.claude import ClaudeRuntime
from harness.runtime.cli_state import login_folder, remove_session
from harness.runtime.host import AgentHost
from harness.runtime.spec import AgentControl, AgentSpec, Approval, RunIO, ToolReply, ToolUse
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn
from harness.workspaces.manager import Workspaces

WAIT = 60.0
SESSION = "0b6f7c8e-3f7a-4d55-9f0e-2b1d3c4e5f60"


class Approving:
    async def call(self, agent_id: str, tool: str, args: Mapping[str, Any]) -> ToolReply:
        return ToolReply({"error": "none"}, is_error=True)

    async def approve(self, agent_id: str, tool: str, args: Mapping[str, Any]) -> Approval:
        return Approval(True)


def script(request: ModelRequest) -> Turn:
    return Turn.finish("looked")


async def run_on_host(
    tmp_path: Path, sandbox: SandboxSettings, *, login: bool = False
) -> tuple[str, Path, Path, list[str]]:
    """(status, the home the CLI was given, the host's workspaces root, the authorization
    headers the model saw) after one run; ``login``: the model is reached through a Claude
    Code login in the home's ``.claude`` (no key in the environment)."""
    home, root = tmp_path / "home", tmp_path / "workspaces"
    (home / ".claude").mkdir(parents=True)
    if login:
        token = {"accessToken": "sk-ant-oat01-login", "refreshToken": "sk-ant-ort01-r",
                 "expiresAt": int(time.time() * 1000) + 3_600_000,
                 "scopes": ["user:inference"], "subscriptionType": "pro"}  # fmt: skip
        credentials = home / ".claude" / ".credentials.json"
        credentials.write_text(json.dumps({"claudeAiOauth": token}), encoding="utf-8")
    role = Role("developer", "Developer", "worker", "You write code.", "roles/developer.md")
    spec = AgentSpec(
        agent_id="a0000000007",
        role=dataclasses.replace(role, tools=("Read", "Bash")),
        prompt="look around",
        cwd="/nowhere",
        task_slug="t-1",
        sandbox=sandbox,
    )

    async def seen(_use: ToolUse) -> None:
        return None

    async with ScriptedModel(script) as model:
        env = {**scripted_env(model.env()), "HOME": str(home)}
        if login:
            env["ANTHROPIC_API_KEY"] = ""
        host = AgentHost(ClaudeRuntime(base_env=env), Workspaces(WorkspaceSettings(root=root)))
        io = RunIO(Approving(), lambda _m: None, seen, lambda _cwd: None)
        outcome = await asyncio.wait_for(host.run(spec, AgentControl(), io), WAIT)
        seen_keys = [r.headers.get("Authorization", "") for r in model.main_requests]
    assert seen_keys, "the CLI never reached the model"
    return outcome.status, home, root, seen_keys


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


@pytest.mark.anyio
@pytest.mark.slow
@pytest.mark.parametrize("sandbox", [SandboxSettings(), SandboxSettings(enabled=False)],
                         ids=["sandboxed", "sandbox off"])  # fmt: skip
async def test_an_agent_leaves_no_transcript_in_the_home_or_the_data_folder(
    tmp_path: Path, sandbox: SandboxSettings
) -> None:
    status, home, root, _ = await run_on_host(tmp_path, sandbox)

    assert status == "completed"
    assert files_under(home) == []  # no ~/.claude/projects/<folder>/<session>.jsonl
    assert files_under(root / ".cli") == []  # its own folder went with the run
    assert (root / "t-1").is_dir()  # the workspace itself stays


@pytest.mark.anyio
@pytest.mark.slow
async def test_a_run_through_a_login_keeps_the_login_and_leaves_no_transcript(
    tmp_path: Path,
) -> None:
    status, home, root, keys = await run_on_host(
        tmp_path, SandboxSettings(enabled=False), login=True
    )

    assert status == "completed"
    assert set(keys) == {"Bearer sk-ant-oat01-login"}  # the login in ~/.claude was used
    assert (home / ".claude" / ".credentials.json").is_file()
    left = [name for name in files_under(home / ".claude") if name.startswith("projects/")]
    assert left == []
    assert not any((home / ".claude" / "projects").iterdir())
    assert files_under(root / ".cli") == []


def test_a_login_is_the_clis_own_folder_only_when_no_key_or_token_is_set(tmp_path: Path) -> None:
    (tmp_path / ".claude").mkdir()
    home = {"HOME": str(tmp_path)}
    assert login_folder(home) is None  # no credentials there
    (tmp_path / ".claude" / ".credentials.json").write_text("{}", encoding="utf-8")

    assert login_folder(home) == tmp_path / ".claude"
    assert login_folder({**home, "ANTHROPIC_API_KEY": "sk-x"}) is None
    assert login_folder({**home, "CLAUDE_CODE_USE_BEDROCK": "1"}) is None
    elsewhere = tmp_path / "cfg"
    (elsewhere).mkdir()
    (elsewhere / ".credentials.json").write_text("{}", encoding="utf-8")
    assert login_folder({**home, "CLAUDE_CONFIG_DIR": str(elsewhere)}) == elsewhere


def test_a_runs_session_files_go_from_a_login_folder_and_nothing_else(tmp_path: Path) -> None:
    other = "11111111-2222-3333-4444-555555555555"
    for name in (
        f"projects/-tmp-w-t-1/{SESSION}.jsonl",
        f"projects/-tmp-w-t-1/{SESSION}/subagents/x.jsonl",
        f"todos/{SESSION}-agent-{SESSION}.json",
        f"session-env/{SESSION}/env",
        f"projects/-tmp-w-t-1/{other}.jsonl",
        ".credentials.json",
        "settings.json",
    ):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(name), encoding="utf-8")

    assert remove_session(tmp_path, SESSION) == 4
    assert files_under(tmp_path) == [
        ".credentials.json",
        f"projects/-tmp-w-t-1/{other}.jsonl",
        "settings.json",
    ]
    assert remove_session(tmp_path, "*") == 0  # never a pattern


def test_links_a_run_left_in_a_login_folder_are_removed_never_followed(tmp_path: Path) -> None:
    login, outside = tmp_path / "login", tmp_path / "outside"
    (outside / "keep").mkdir(parents=True)
    (outside / f"{SESSION}.jsonl").write_text("theirs", encoding="utf-8")
    (outside / "keep" / "file").write_text("theirs", encoding="utf-8")
    (login / "projects" / "-tmp-w-t-1").mkdir(parents=True)
    (login / "projects" / "linked").symlink_to(outside)  # glob's `*` would go through it
    (login / "session-env").mkdir()
    (login / "session-env" / SESSION).symlink_to(outside / "keep")
    (login / "projects" / "-tmp-w-t-1" / SESSION).symlink_to(outside)

    assert remove_session(login, SESSION) == 2
    assert files_under(outside) == [f"{SESSION}.jsonl", "keep/file"]
    assert not (login / "session-env" / SESSION).exists()
    assert not (login / "projects" / "-tmp-w-t-1").exists()  # it held nothing but the link
