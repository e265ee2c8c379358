"""A nats-server for a test module, and store settings with a prefix of each test's own on
it (as harnesses sharing a server have)."""

from __future__ import annotations

import itertools
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from harness.config.store_schema import StoreSettings
from harness.testing.nats_server import READY, free_port, nats_server_binary

_prefixes = itertools.count(1)


def serve_nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One server for the module (``nats_url = module_server()``); each test takes a prefix
    of its own on it, as harnesses sharing a server do."""
    folder = tmp_path_factory.mktemp("nats")
    port = free_port()
    log = folder / "server.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [nats_server_binary(), "--addr", "127.0.0.1", "--port", str(port), "--jetstream",
             "--store_dir", str(folder / "js")],
            stdout=subprocess.DEVNULL, stderr=out,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while READY not in log.read_bytes():
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "nats-server did not start in 10 s"
            time.sleep(0.02)
        yield f"nats://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)


def settings_for(url: str, prefix: str | None = None) -> StoreSettings:
    return StoreSettings(kind="nats", url=url, prefix=prefix or f"t{next(_prefixes)}")


def module_server() -> Any:
    """The ``nats_url`` fixture of a test module: one server for all its tests."""
    return pytest.fixture(scope="module", name="nats_url")(serve_nats)
