"""config.yaml's ``mcpServer.tokens``: each a Slack user's bearer token, written or named by
its environment variable; mistakes name the field and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.mcp_server_schema import resolve_tokens
from harness.config.settings import parse_config
from harness.errors import ConfigError
from harness.mcp_server.auth import TokenTable

FILE = Path("/srv/harness/config.yaml")
TOKEN = "0123456789abcdef0123"


def tokens_of(*entries: dict[str, str], environ: dict[str, str] | None = None) -> dict[str, str]:
    config = parse_config({"mcpServer": {"tokens": list(entries)}}, file=FILE)
    return resolve_tokens(config.mcp_server, environ or {}, file=FILE)


def test_a_token_in_the_file_or_in_a_variable_maps_to_its_user() -> None:
    found = tokens_of(
        {"user": "U1", "token": TOKEN},
        {"user": "U2", "tokenEnv": "ALICE_TOKEN"},
        environ={"ALICE_TOKEN": "fedcba9876543210fedc"},
    )
    assert found == {TOKEN: "U1", "fedcba9876543210fedc": "U2"}


def test_a_token_is_never_shown_in_the_settings_repr() -> None:
    config = parse_config({"mcpServer": {"tokens": [{"user": "U1", "token": TOKEN}]}}, file=FILE)
    assert TOKEN not in repr(config)


@pytest.mark.parametrize(
    ("entry", "field", "problem"),
    [
        ({"user": "alice", "token": TOKEN}, "mcpServer.tokens[0].user", "not a Slack user id"),
        ({"user": "U1"}, "mcpServer.tokens[0]", "exactly one of `token` and `tokenEnv`"),
        ({"user": "U1", "token": "short"}, "mcpServer.tokens[0].token", "at least 16"),
        ({"user": "U1", "tokenEnv": "9BAD"}, "mcpServer.tokens[0].tokenEnv", "required pattern"),
    ],
)
def test_a_wrong_entry_names_its_field(entry: dict[str, str], field: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        tokens_of(entry)
    assert caught.value.field == field
    assert problem in caught.value.problem


def test_an_unset_or_short_variable_or_no_token_at_all_is_said_at_start() -> None:
    with pytest.raises(ConfigError, match=r"\$ALICE_TOKEN is not set") as unset:
        tokens_of({"user": "U1", "tokenEnv": "ALICE_TOKEN"})
    assert unset.value.field == "mcpServer.tokens[0].tokenEnv"
    assert "export ALICE_TOKEN=" in unset.value.fix
    with pytest.raises(ConfigError, match="at least 16"):
        tokens_of({"user": "U1", "tokenEnv": "ALICE_TOKEN"}, environ={"ALICE_TOKEN": "abc"})
    with pytest.raises(ConfigError, match="nobody could use the HTTP server"):
        tokens_of()


def test_the_same_token_twice_is_refused() -> None:
    with pytest.raises(ConfigError, match="the same token is given twice"):
        tokens_of({"user": "U1", "token": TOKEN}, {"user": "U2", "token": TOKEN})


@pytest.mark.anyio
async def test_only_a_configured_token_is_accepted_and_it_carries_its_user() -> None:
    table = TokenTable({TOKEN: "U1", "another-token-0123456789": "U2"})
    accepted = await table.verify_token(TOKEN)
    assert accepted is not None
    assert (accepted.client_id, accepted.subject) == ("U1", "U1")
    assert TOKEN not in repr(accepted)
    assert await table.verify_token(TOKEN + "x") is None
    assert await table.verify_token("") is None
