"""compose.yaml's services and the Dockerfile's settings as this machine runs them without a
container engine: each service's command and environment exactly as written, with only what
a container would provide mapped onto this machine (its /data volume to a folder, the host
``nats`` to a local server, a published port to a free one, the image's /opt/harness/bin to
this checkout's virtualenv, the entrypoint to deploy/entrypoint.sh)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "compose.yaml"
DOCKERFILE = REPO / "Dockerfile"
ENTRYPOINT = REPO / "deploy" / "entrypoint.sh"
NATS_IN_COMPOSE = "nats://nats:4222"


def compose() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE.read_text("utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def dockerfile_instructions() -> list[tuple[str, str]]:
    """The Dockerfile's instructions, (KEYWORD, the rest), continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text("utf-8"))
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


def image_env() -> dict[str, str]:
    """The Dockerfile's ENV, but PATH (the image's own)."""
    env: dict[str, str] = {}
    for keyword, rest in dockerfile_instructions():
        if keyword == "ENV":
            for word in shlex.split(rest):
                name, _, value = word.partition("=")
                env[name] = value
    env.pop("PATH", None)
    return env


@dataclass(frozen=True)
class Here:
    """What stands in for the container's surroundings on this machine."""

    data: Path  # the service's /data volume
    nats_url: str  # the `nats` service
    ports: Mapping[int, int]  # a port in the container: the free one here
    dotenv: Mapping[str, str]  # .env beside compose.yaml

    def local(self, text: str) -> str:
        text = text.replace(NATS_IN_COMPOSE, self.nats_url)
        for inside, here in self.ports.items():
            text = re.sub(rf"(?<!\d){inside}(?!\d)", str(here), text)
        return re.sub(r"(?<![\w/.])/data(?=/|$|\b)", str(self.data), text)

    def service(self, name: str) -> tuple[list[str], dict[str, str]]:
        """Service ``name``'s command (through the image's entrypoint) and the environment
        compose gives it: the image's ENV, its env_file, then its ``environment`` (a name
        without a value passes .env's value when .env has one, as compose does)."""
        service = compose()["services"][name]
        env = {key: self.local(value) for key, value in image_env().items()}
        if "env_file" in service:
            assert service["env_file"] == ".env", service["env_file"]
            env.update(self.dotenv)
        for key, value in (service.get("environment") or {}).items():
            if value is not None:
                env[key] = self.local(str(value))
            elif key in self.dotenv:
                env[key] = self.dotenv[key]
        command = [self.local(str(word)) for word in service["command"]]
        return ["sh", str(ENTRYPOINT), *command], env

    def healthcheck(self, name: str) -> list[str]:
        test = compose()["services"][name]["healthcheck"]["test"]
        assert test[0] == "CMD", test
        return [self.local(str(word)) for word in test[1:]]
