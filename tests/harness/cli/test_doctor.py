"""``harness doctor``: the checks against a Slack emulator, a scripted model and a closed
NATS port, the rendering with literals, and the command end to end."""

from __future__ import annotations

import os
import re
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import yaml
from aiohttp import web

from bot.testing.slack_emulator import SlackEmulator
from harness.cli import doctor
from harness.cli.doctor_check import Check, exit_code, render
from harness.cli.scaffold import DEFAULTS
from harness.testing import spawn
from harness.testing.scripted_model import ScriptedModel, demo_script

BOT_TOKEN = "xoxb-doctor"
APP_TOKEN = "xapp-doctor"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home without a Claude Code login."""
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


@pytest.fixture
def sandbox_works(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sandbox probe passes whatever this machine is (its own tests cover it)."""

    async def fine() -> None:
        return None

    monkeypatch.setattr("harness.sandbox.runner.check_sandbox", fine)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {check.name: check for check in checks}


# ---------------------------------------------------------------------------- rendering


def test_render_marks_each_line_and_puts_the_fix_under_failures_and_warnings() -> None:
    checks = [
        Check("git", "ok", "git version 2.39.5", "never shown"),
        Check("disk space", "warn", "1.5 GB free for /data", "free space"),
        Check("sandbox", "warn", "agents run without the OS sandbox"),
        Check("Slack bot token", "fail", "SLACK_BOT_TOKEN is not set", "export it"),
    ]
    assert render(checks) == (
        "✓ git: git version 2.39.5\n"
        "! disk space: 1.5 GB free for /data\n"
        "  fix: free space\n"
        "! sandbox: agents run without the OS sandbox\n"
        "✗ Slack bot token: SLACK_BOT_TOKEN is not set\n"
        "  fix: export it"
    )


def test_exit_code_is_1_on_a_failure_only() -> None:
    assert exit_code([Check("a", "ok", ""), Check("b", "warn", "")]) == 0
    assert exit_code([Check("a", "ok", ""), Check("b", "fail", "", "x")]) == 1


def test_scopes_missing_from_the_token_are_listed() -> None:
    check = doctor.scope_check(["chat:write", "commands", "im:history"], "chat:write,im:history")
    assert (check.status, check.detail) == ("fail", "missing commands")
    assert "reinstall the app" in check.fix
    assert doctor.scope_check(["chat:write"], "chat:write, commands").status == "ok"
    assert doctor.scope_check(["chat:write"], None).status == "warn"


def test_the_manifest_scopes_are_read_from_the_package_s_copy_of_the_manifest() -> None:
    # Shipped with the defaults, so that an installed harness needs no checkout.
    manifest = Path(__file__).resolve().parents[3] / "manifest.yml"
    assert (DEFAULTS / "manifest.yml").read_bytes() == manifest.read_bytes()
    wanted = yaml.safe_load(manifest.read_text("utf-8"))["oauth_config"]["scopes"]["bot"]

    scopes = doctor.manifest_scopes()

    assert scopes == wanted
    assert {"chat:write", "commands"} <= set(wanted)


def test_disk_space_thresholds() -> None:
    folder = Path("/data/tasks")
    low = doctor.disk_check(folder, 100 * 1024**2)
    assert (low.status, low.detail) == ("fail", "100 MB free for /data/tasks")
    assert doctor.disk_check(folder, 1024**3).status == "warn"
    assert doctor.disk_check(folder, 5 * 1024**3) == Check(
        "disk space", "ok", "5.0 GB free for /data/tasks"
    )


def test_connection_mode() -> None:
    assert doctor.connection_mode({"SLACK_APP_TOKEN": "xapp-1"}).status == "ok"
    assert doctor.connection_mode({"SLACK_SIGNING_SECRET": "s"}).detail == (
        "HTTP mode (SLACK_SIGNING_SECRET)"
    )
    wrong = doctor.connection_mode({"SLACK_APP_TOKEN": "xoxb-1"})
    assert wrong.status == "fail" and "xapp-" in wrong.detail
    assert doctor.connection_mode({}).status == "fail"


# ---------------------------------------------------------------------------- the checks


@pytest.fixture
async def slack() -> AsyncIterator[SlackEmulator]:
    async with SlackEmulator(bot_token=BOT_TOKEN, app_token=APP_TOKEN, delivery="none") as em:
        yield em


@pytest.fixture
async def model() -> AsyncIterator[ScriptedModel]:
    async with ScriptedModel(demo_script) as scripted:
        yield scripted


def good_env(slack: SlackEmulator, model: ScriptedModel) -> dict[str, str]:
    return {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_APP_TOKEN": APP_TOKEN,
        "SLACK_API_URL": slack.api_url,
        "ANTHROPIC_API_KEY": "sk-ant-test",
        "ANTHROPIC_BASE_URL": model.base_url,
    }


@pytest.mark.anyio
@pytest.mark.usefixtures("sandbox_works")
async def test_a_good_setup_passes_every_check(
    project_dir: Path, home: Path, slack: SlackEmulator, model: ScriptedModel
) -> None:
    checks = await doctor.run_checks(project_dir / "config.yaml", good_env(slack, model), home)
    named = by_name(checks)
    assert [c.name for c in checks] == [
        "config",
        "Slack bot token",
        "Slack scopes",
        "Slack connection",
        "model access",
        "git",
        "sandbox",
        "disk space",
    ]
    # The emulator does not report scopes: a warning, not a failure.
    assert named["Slack scopes"].status == "warn"
    assert all(c.status == "ok" for c in checks if c.name != "Slack scopes"), render(checks)
    assert "developer" in named["config"].detail
    assert "bot user @" in named["Slack bot token"].detail
    assert named["git"].detail.startswith("git version")
    assert exit_code(checks) == 0
    assert slack.calls("auth.test")
    assert model.requests == []  # no paid call


@pytest.mark.anyio
@pytest.mark.usefixtures("sandbox_works")
async def test_a_refused_slack_token_and_model_key_fail(
    project_dir: Path, home: Path, slack: SlackEmulator
) -> None:
    async def refuse(_: web.Request) -> web.Response:
        return web.json_response({"error": "invalid x-api-key"}, status=401)

    app = web.Application()
    app.router.add_get("/v1/models", refuse)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        environ = {
            "SLACK_BOT_TOKEN": "xoxb-revoked",
            "SLACK_API_URL": slack.api_url,
            "SLACK_SIGNING_SECRET": "secret",
            "ANTHROPIC_API_KEY": "sk-ant-wrong",
            "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
        }
        named = by_name(await doctor.run_checks(project_dir / "config.yaml", environ, home))
    finally:
        await runner.cleanup()
    assert named["Slack bot token"].status == "fail"
    assert named["Slack bot token"].detail == "Slack refused SLACK_BOT_TOKEN: invalid_auth"
    assert "Slack scopes" not in named
    assert named["Slack connection"].status == "ok"
    model_check = named["model access"]
    assert model_check.status == "fail" and "the key was refused (HTTP 401" in model_check.detail


@pytest.mark.anyio
async def test_unreachable_services_fail_naming_the_url(project_dir: Path, home: Path) -> None:
    port = closed_port()
    environ = {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_API_URL": f"http://127.0.0.1:{port}/api/",
        "ANTHROPIC_API_KEY": "sk-ant-test",
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
    }
    named = by_name(await doctor.run_checks(project_dir / "config.yaml", environ, home))
    assert named["Slack bot token"].status == "fail"
    assert f"http://127.0.0.1:{port}/api/auth.test" in named["Slack bot token"].detail
    assert named["model access"].status == "fail"
    assert f"http://127.0.0.1:{port}/v1/models" in named["model access"].detail


@pytest.mark.anyio
async def test_sandbox_off_is_a_warning(project_dir: Path, home: Path) -> None:
    config = project_dir / "config.yaml"
    text = config.read_text("utf-8")
    config.write_text(re.sub(r"(?m)^sandbox:\n(?:[ ].*\n|\n)*", "sandbox: off\n\n", text))
    named = by_name(await doctor.run_checks(config, {}, home))
    assert named["sandbox"] == Check("sandbox", "warn", doctor.SANDBOX_OFF)


@pytest.mark.anyio
@pytest.mark.waits
async def test_nats_on_a_closed_port_fails_with_the_url(project_dir: Path, home: Path) -> None:
    pytest.importorskip("nats")
    url = f"nats://127.0.0.1:{closed_port()}"
    config = project_dir / "config.yaml"
    config.write_text(config.read_text() + f"\nruntime:\n  kind: nats\n  url: {url}\n")
    named = by_name(await doctor.run_checks(config, {}, home))
    nats_check = named["NATS"]
    assert nats_check.status == "fail" and url in nats_check.detail
    assert "nats-server" in nats_check.fix
    # The agents run on the workers: no model access here is only a warning.
    assert named["model access"].status == "warn"


# ---------------------------------------------------------------------------- end to end


@pytest.fixture
def clean_env() -> Iterator[dict[str, str]]:
    names = ("SLACK_", "ANTHROPIC_", "CLAUDE_CODE_", "HARNESS_")
    yield {k: v for k, v in os.environ.items() if not k.startswith(names)}


@pytest.mark.subprocess
def test_doctor_command_on_a_broken_setup(
    project_dir: Path, home: Path, clean_env: dict[str, str]
) -> None:
    config = project_dir / "config.yaml"
    config.write_text(config.read_text() + "\nnoSuchSetting: 1\n")
    done = spawn.run(
        [sys.executable, "-m", "harness", "doctor", "--config", str(config)],
        env={**clean_env, "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("✗ config: ") and "noSuchSetting" in lines[0]
    assert lines[1].startswith("  fix: ")
    assert any(line.startswith("- Slack: not set up here") for line in lines)
    assert any(line.startswith("✗ model access: ") for line in lines)
    assert any(line.startswith("✓ git: git version") for line in lines)
    fails = sum(line.startswith("✗") for line in lines)
    assert sum(line.startswith("  fix: ") for line in lines) >= fails
