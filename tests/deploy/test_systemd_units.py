"""deploy/systemd's units, their commands run here as systemd would run them (its
ExecStart, Environment and the EnvironmentFile's variables), after README's install steps:
a real nats-server, a real ``harness worker@box-1`` and the bot in Socket Mode against the
Slack emulator, whose DM an agent on the worker answers. Only the machine's places are
mapped: /opt/harness/bin to this virtualenv, /srv/harness and the NATS state to folders here,
the ports to free ones."""

from __future__ import annotations

import configparser
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bot.testing.slack_emulator import SlackEmulator
from harness.testing.nats_server import free_port
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn
from tests.deploy.outside import REPO
from tests.deploy.processes import answered, machine_env, started

UNITS = REPO / "deploy" / "systemd"


def unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string((UNITS / name).read_text("utf-8"))
    return parser


def finish(request: ModelRequest) -> Turn:
    return Turn.finish("deployed with systemd")


@pytest.mark.anyio
@pytest.mark.nats
@pytest.mark.subprocess
async def test_the_units_commands_start_nats_a_worker_and_the_bot_that_answers_a_dm(
    tmp_path: Path,
) -> None:
    port, health = free_port(), free_port()
    places = {
        "/opt/harness/bin": str(Path(sys.executable).parent),
        "/srv/harness": str(tmp_path / "srv"),
        "/var/lib/harness-nats": str(tmp_path / "nats"),
        "4222": str(port),
        "8080": str(health),
        "%i": "box-1",
    }

    def here(text: str) -> str:
        for place, local in places.items():
            text = re.sub(rf"(?<![\w.]){re.escape(place)}(?![\w])", local, text)
        return text

    def service(name: str) -> tuple[list[str], dict[str, str]]:
        section = unit(name)["Service"]
        env = dict(word.split("=", 1) for word in shlex.split(section.get("Environment", "")))
        return [here(word) for word in shlex.split(section["ExecStart"])], {
            key: here(value) for key, value in env.items()
        }

    # README's install steps: the config, its roles and `runtime: nats` in /srv/harness.
    srv = tmp_path / "srv"
    init = subprocess.run(
        [sys.executable, "-m", "harness", "init", str(srv)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert init.returncode == 0, init.stderr
    with (srv / "config.yaml").open("a", encoding="utf-8") as config:
        config.write(f"\nruntime:\n  kind: nats\n  url: nats://127.0.0.1:{port}\n")

    nats_args, _ = service("harness-nats.service")
    worker_args, _ = service("harness-worker@.service")
    bot_args, bot_env = service("harness-bot.service")
    assert bot_env == {"HARNESS_CONFIG": str(srv / "config.yaml")}
    for name in ("harness-bot.service", "harness-worker@.service"):
        assert unit(name)["Service"]["User"] == "harness", name  # never root
    (tmp_path / "nats").mkdir()
    async with (
        ScriptedModel(finish) as model,
        SlackEmulator(bot_token="xoxb-unit", app_token="xapp-unit") as slack,
    ):
        # /etc/harness/worker.env and /etc/harness/bot.env, as README says to write them.
        worker_file = {
            "HARNESS_NATS_URL": f"nats://127.0.0.1:{port}",
            "ANTHROPIC_API_KEY": model.env()["ANTHROPIC_API_KEY"],
            "ANTHROPIC_BASE_URL": model.base_url,
        }
        bot_file = {
            "SLACK_BOT_TOKEN": "xoxb-unit",
            "SLACK_APP_TOKEN": "xapp-unit",
            "SLACK_API_URL": slack.api_url,  # Slack here is the emulator
        }
        async with (
            started("nats", nats_args, machine_env(), srv) as nats,
            started("worker", worker_args, {**machine_env(), **worker_file}, srv) as worker,
        ):
            await nats.says("Server is ready")
            await worker.says("box-1: ready")
            bot_env = {**machine_env(), **bot_env, **bot_file}
            async with started("bot", bot_args, bot_env, srv) as bot:
                await bot.says("connected to Slack workspace")

                thread = await answered(slack, "ship it")

                assert "deployed with systemd" in thread
                assert "worker box-1: agent" in await worker.says("completed")
                assert await bot.stop() == 0, bot.log()
            assert await worker.stop() == 0, worker.log()

    assert (srv / "worker-workspaces" / "box-1" / "ship-it").is_dir()
    assert yaml.safe_load((srv / "config.yaml").read_text("utf-8"))["runtime"]["kind"] == "nats"
