"""`harness doctor` per set-up, as a user runs it: it checks what the set-up uses and nothing
else, exits 0 on a correct terminal-only, MCP-only, Slack and GitHub set-up, and names each
fault of a broken one. The real command in a process, against the scripted model, the Slack
emulator, the loopback fake GitHub and real git repositories."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.testing.slack_emulator import SlackEmulator
from harness.testing import spawn
from harness.testing.fake_github import FakeGitHub
from harness.testing.nats_server import NatsServer
from harness.testing.scripted_model import ScriptedModel, demo_script

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

BOT_TOKEN = "xoxb-doctor"
APP_TOKEN = "xapp-doctor"
GITHUB_TOKEN = "ghp_doctor_accepted"
MCP_TOKEN = "3f9c2a7e5b1d4c6f8a0e2b4d6f8a1c3e"
OUTSIDE = ("SLACK_", "ANTHROPIC_", "CLAUDE_CODE_", "HARNESS_", "GITHUB_")


@pytest.fixture
async def model() -> AsyncIterator[ScriptedModel]:
    async with ScriptedModel(demo_script) as scripted:
        yield scripted


@pytest.fixture
async def github() -> AsyncIterator[FakeGitHub]:
    async with FakeGitHub() as fake:
        fake.add_token(GITHUB_TOKEN, "harness-bot")
        fake.add_repository("acme/web")
        yield fake


def machine_env(tmp_path: Path, model: ScriptedModel) -> dict[str, str]:
    """This machine's environment without any set-up of its own, and a model key."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(OUTSIDE)}
    return {**env, "HOME": str(home), **model.env()}


async def doctor(config: Path, env: dict[str, str], *args: str) -> tuple[int, list[str]]:
    process = await spawn.create_subprocess_exec(
        sys.executable,
        "-m",
        "harness",
        "doctor",
        "--config",
        str(config),
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    assert not err, err.decode()
    return process.returncode, out.decode().splitlines()


def failures(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("✗")]


def git_repository(folder: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(folder)], check=True, timeout=30)
    return folder


def add_text(config: Path, text: str) -> Path:
    config.write_text(config.read_text(encoding="utf-8") + text, encoding="utf-8")
    return config


async def test_a_terminal_only_set_up_passes_without_slack(
    project_dir: Path, tmp_path: Path, model: ScriptedModel
) -> None:
    code, lines = await doctor(project_dir / "config.yaml", machine_env(tmp_path, model))

    assert (code, failures(lines)) == (0, []), "\n".join(lines)
    assert any(line.startswith("- Slack: not set up here") for line in lines)
    assert any(line.startswith("✓ model access: ") for line in lines)
    assert not any("GitHub" in line or "MCP tokens" in line for line in lines)


async def test_an_mcp_only_set_up_passes_and_its_http_tokens_are_checked(
    project_dir: Path, tmp_path: Path, model: ScriptedModel
) -> None:
    config = add_text(
        project_dir / "config.yaml",
        "\nmcpServer:\n  tokens:\n    - {user: U012ABCDEF, tokenEnv: HARNESS_MCP_TOKEN_ALICE}\n",
    )
    env = machine_env(tmp_path, model)

    code, lines = await doctor(config, {**env, "HARNESS_MCP_TOKEN_ALICE": MCP_TOKEN})
    unset_code, unset = await doctor(config, env)

    assert (code, failures(lines)) == (0, []), "\n".join(lines)
    assert "✓ MCP tokens: 1 token(s) for `harness mcp --transport http`" in lines
    assert unset_code == 1
    assert failures(unset) == [
        "✗ MCP tokens: mcpServer.tokens[0].tokenEnv: $HARNESS_MCP_TOKEN_ALICE is not set (the "
        "token of U012ABCDEF)"
    ]


async def test_a_slack_set_up_passes_and_one_without_tokens_is_checked_on_demand(
    project_dir: Path, tmp_path: Path, model: ScriptedModel
) -> None:
    config = project_dir / "config.yaml"
    env = machine_env(tmp_path, model)
    async with SlackEmulator(bot_token=BOT_TOKEN, app_token=APP_TOKEN, delivery="none") as slack:
        slack_env = {
            **env,
            "SLACK_BOT_TOKEN": BOT_TOKEN,
            "SLACK_APP_TOKEN": APP_TOKEN,
            "SLACK_API_URL": slack.api_url,
        }
        code, lines = await doctor(config, slack_env)
    missing_code, missing = await doctor(config, env, "--slack")

    assert (code, failures(lines)) == (0, []), "\n".join(lines)
    assert "✓ Slack connection: Socket Mode (SLACK_APP_TOKEN)" in lines
    assert missing_code == 1
    assert failures(missing) == [
        "✗ Slack bot token: SLACK_BOT_TOKEN is not set",
        "✗ Slack connection: neither SLACK_APP_TOKEN nor SLACK_SIGNING_SECRET is set",
    ]


async def test_a_github_set_up_passes_and_a_refused_token_and_a_missing_webhook_secret_fail(
    project_dir: Path, tmp_path: Path, model: ScriptedModel, github: FakeGitHub
) -> None:
    web = git_repository(tmp_path / "web")
    config = add_text(
        project_dir / "config.yaml",
        f"\ngithub:\n  apiUrl: {github.api_url}\n"
        f"workspaces:\n  repositories:\n    web: {{path: {web}, github: acme/web}}\n",
    )
    env = machine_env(tmp_path, model)

    code, lines = await doctor(config, {**env, "GITHUB_TOKEN": GITHUB_TOKEN})
    add_text(
        config,
        "routines:\n  - {name: triage, on: {github: [issues.opened]}, channel: C012ABCDEF, "
        "role: reviewer, prompt: triage it}\n",
    )
    broken_code, broken = await doctor(config, {**env, "GITHUB_TOKEN": "ghp_revoked"})

    assert (code, failures(lines)) == (0, []), "\n".join(lines)
    assert "✓ GitHub acme/web: GITHUB_TOKEN accepted, push access" in lines
    assert broken_code == 1
    assert failures(broken) == [
        "✗ GitHub acme/web: GitHub refused GITHUB_TOKEN (HTTP 401)",
        "✗ GitHub webhook: routines `on: github` need GITHUB_WEBHOOK_SECRET, which is not set",
    ]


async def test_a_repository_path_missing_or_not_a_git_repository_fails_the_config_check(
    project_dir: Path, tmp_path: Path, model: ScriptedModel
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    config = project_dir / "config.yaml"
    shipped = config.read_text(encoding="utf-8")
    env = machine_env(tmp_path, model)

    said = {}
    for name, path in (("gone", tmp_path / "gone"), ("plain", plain)):
        config.write_text(
            f"{shipped}\nworkspaces:\n  repositories:\n    {name}: {{path: {path}}}\n",
            encoding="utf-8",
        )
        code, lines = await doctor(config, env)
        assert code == 1
        said[name] = lines[:2]

    field = "workspaces.repositories.{}.path"
    assert said["gone"][0] == (
        f"✗ config: {config}: {field.format('gone')}: {tmp_path / 'gone'} does not exist"
    )
    assert said["gone"][1].startswith("  fix: point `path:` to a local git clone")
    assert said["plain"][0] == (
        f"✗ config: {config}: {field.format('plain')}: {plain} is not a git repository"
    )
    assert said["plain"][1].startswith(f"  fix: run `git init` in {plain}")


@pytest.mark.nats
async def test_a_nats_set_up_passes_with_its_server_reached(
    project_dir: Path, tmp_path: Path, model: ScriptedModel
) -> None:
    async with NatsServer(tmp_path / "nats") as nats:
        config = add_text(
            project_dir / "config.yaml", f"\nruntime: {{kind: nats, url: '{nats.url}'}}\n"
        )
        code, lines = await doctor(config, machine_env(tmp_path, model))

    assert (code, failures(lines)) == (0, []), "\n".join(lines)
    assert any(line.startswith("✓ NATS: ") for line in lines), lines
