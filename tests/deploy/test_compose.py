"""compose.yaml and the Dockerfile, checked without a container engine: the file names NATS,
a worker and the bot with their secrets from .env only; then each service's command, with
the environment compose gives it, runs here (``outside.py`` maps only what a container would
provide): a real nats-server, a real ``harness worker`` and the bot in Socket Mode against
the Slack emulator, whose DM is answered by an agent (the real CLI, in bubblewrap, against
the scripted model) that ran on the worker."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
import yaml

from bot.testing.slack_emulator import SlackEmulator
from harness.testing.nats_server import free_port, nats_server_binary
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn
from tests.deploy.outside import REPO, Here, compose, dockerfile_instructions
from tests.deploy.processes import WAIT, answered, machine_env, started

SECRETS = ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET", "ANTHROPIC_API_KEY")


def test_compose_names_nats_a_worker_and_the_bot_and_takes_secrets_from_env_only() -> None:
    services = compose()["services"]

    assert set(services) == {"nats", "worker", "bot"}
    assert "--jetstream" in services["nats"]["command"]
    assert services["worker"]["command"][:2] == ["harness", "worker"]
    assert services["bot"]["command"][:2] == ["harness", "bot"]
    assert services["bot"]["env_file"] == ".env"
    for name, service in services.items():
        environment = service.get("environment") or {}
        for secret in SECRETS:
            assert environment.get(secret) is None, f"{name} writes {secret} into compose.yaml"
    # The worker gets the model access only: never the bot's Slack secrets.
    assert "env_file" not in services["worker"]
    assert not [key for key in services["worker"]["environment"] if key.startswith("SLACK_")]
    assert set(services["worker"]["security_opt"]) == {
        "seccomp=unconfined",
        "apparmor=unconfined",
        "systempaths=unconfined",
    }
    # Every service keeps its state on a named volume.
    for name, service in services.items():
        [volume] = service["volumes"]
        assert volume.split(":")[0] in compose()["volumes"], name


def test_the_image_installs_with_the_script_runs_as_a_user_and_bakes_in_no_secret() -> None:
    instructions = dockerfile_instructions()
    keywords = dict(instructions)

    assert keywords["FROM"].startswith("python:") and keywords["FROM"].endswith("-slim")
    assert [rest for kw, rest in instructions if "deploy/install.sh" in rest and kw == "RUN"]
    assert keywords["USER"] == "harness"
    assert keywords["CMD"] == '["harness", "bot"]'
    assert "/data" in keywords["VOLUME"]
    assert not [rest for kw, rest in instructions if any(s in rest for s in SECRETS)]
    ignored = (REPO / ".dockerignore").read_text("utf-8").splitlines()
    assert ".env" in ignored and ".agents" in ignored


def finish(request: ModelRequest) -> Turn:
    return Turn.finish("the login bug is fixed")


async def healthy(args: Sequence[str], env: Mapping[str, str]) -> int:
    check = await asyncio.create_subprocess_exec(
        *args, env=dict(env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return await asyncio.wait_for(check.wait(), WAIT)


@pytest.mark.anyio
@pytest.mark.nats
@pytest.mark.subprocess
async def test_compose_s_commands_run_here_and_the_bot_answers_a_dm_with_an_agent_on_the_worker(
    tmp_path: Path,
) -> None:
    async with (
        ScriptedModel(finish) as model,
        SlackEmulator(bot_token="xoxb-deploy", app_token="xapp-deploy") as slack,
    ):
        dotenv = {
            "SLACK_BOT_TOKEN": "xoxb-deploy",
            "SLACK_APP_TOKEN": "xapp-deploy",
            "ANTHROPIC_API_KEY": model.env()["ANTHROPIC_API_KEY"],
            "ANTHROPIC_BASE_URL": model.base_url,
            # Slack itself here is the emulator: the bot reads its API's address from this.
            "SLACK_API_URL": slack.api_url,
        }
        port = free_port()
        nats_url = f"nats://127.0.0.1:{port}"
        ports = {8222: free_port(), 8080: free_port(), 8081: free_port()}

        def here(service: str) -> Here:
            (tmp_path / service).mkdir()
            return Here(tmp_path / service, nats_url, ports, dotenv)

        nats_here = here("nats")
        nats_command = [nats_here.local(word) for word in compose()["services"]["nats"]["command"]]
        nats = [nats_server_binary(), *nats_command, "--addr", "127.0.0.1", "--port", str(port)]
        worker_args, worker_env = here("worker").service("worker")
        bot_here = here("bot")
        bot_args, bot_env = bot_here.service("bot")
        assert not [key for key in worker_env if key.startswith("SLACK_")]

        async with (
            started("nats", nats, machine_env(), tmp_path) as nats_server,
            started("worker", worker_args, {**machine_env(), **worker_env}, tmp_path) as worker,
        ):
            await nats_server.says("Server is ready")
            assert "worker-1: ready" in await worker.says("ready")
            async with started("bot", bot_args, {**machine_env(), **bot_env}, tmp_path) as bot:
                line = await bot.says("connected to Slack workspace")
                assert "Socket Mode" in line and f"agents run NATS at {nats_url}" in line

                thread = await answered(slack, "fix the login bug")
                assert "the login bug is fixed" in thread
                assert model.main_requests
                ran = await worker.says("completed")
                assert "worker worker-1: agent" in ran, worker.log()
                assert model.main_requests

                for name in ("bot", "worker"):
                    assert await healthy(bot_here.healthcheck(name), machine_env()) == 0, name
                assert await bot.stop() == 0, bot.log()
            assert await worker.stop() == 0, worker.log()

    config = yaml.safe_load((tmp_path / "bot" / "config.yaml").read_text("utf-8"))
    assert config["runtime"] == {"kind": "nats", "url": nats_url}
    assert list((tmp_path / "bot" / ".agents" / "tasks").glob("*/task.json"))
    assert (tmp_path / "worker" / "workspaces" / "fix-the-login-bug").is_dir()
    assert list((tmp_path / "nats").glob("jetstream*"))
