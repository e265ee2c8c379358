"""``store:`` in config.yaml: where tasks are kept, the tasks folder (default) or a NATS
server; a NATS store takes the runtime's server unless it names its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.settings import parse_config
from harness.config.store_schema import StoreSettings
from harness.errors import ConfigError

FILE = Path("/srv/harness/config.yaml")
RUNTIME = {"kind": "nats", "url": "nats://10.0.0.5:4222", "credentials": "bot.creds"}


def test_tasks_stay_in_the_folder_by_default() -> None:
    assert parse_config({}, file=FILE).store.kind == "file"


def test_a_nats_store_takes_the_runtimes_server_credentials_and_prefix() -> None:
    config = parse_config(
        {"runtime": {**RUNTIME, "prefix": "acme"}, "store": {"kind": "nats"}}, file=FILE
    )

    assert config.store == StoreSettings(
        kind="nats",
        url="nats://10.0.0.5:4222",
        credentials=Path("/srv/harness/bot.creds"),
        prefix="acme",
    )


def test_a_nats_store_with_its_own_server_keeps_none_of_the_runtimes_credentials() -> None:
    config = parse_config(
        {"runtime": RUNTIME, "store": {"kind": "nats", "url": "nats://store:4222"}}, file=FILE
    )

    assert (config.store.url, config.store.credentials) == ("nats://store:4222", None)


def test_a_nats_store_without_any_server_is_refused_naming_the_field_and_fix() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"store": {"kind": "nats"}}, file=FILE)

    error = caught.value
    assert (error.file, error.field) == (str(FILE), "store.url")
    assert "runtime.url" in error.problem and "kind: file" in error.fix


@pytest.mark.parametrize(
    "store", [{"kind": "postgres"}, {"kind": "nats", "url": "x", "prefix": "a.b"}, {"bucket": 1}]
)
def test_a_bad_store_section_is_refused_naming_the_store_field(store: object) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"store": store}, file=FILE)

    assert caught.value.field.startswith("store")
