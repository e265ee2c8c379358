"""config.yaml's ``mcpServer:`` section: who may reach ``harness mcp --transport http``.

Each entry maps a bearer token to a Slack user, whose rights the caller then has (the task's
requester or an admin decides, as in Slack). A token is written in the file (``token:``) or,
better, named by the environment variable holding it (``tokenEnv:``), read when the server
starts. Over stdio no token is needed: the caller is the local user, as on the terminal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

import pydantic
from pydantic import Field

from harness.config.env_name import SHELL_NAME
from harness.config.section import Section
from harness.config.slack_ids import SLACK_ID_EXAMPLE, UserId
from harness.errors import ConfigError
from harness.problems import Invalid, NonEmptyStr

# Shorter tokens can be guessed; 16 characters of `openssl rand -hex 16` are 128 bits.
MIN_TOKEN_CHARS = 16
_MAKE_ONE = "make one with `openssl rand -hex 32`"


class McpTokenEntry(Section):
    user: UserId = Field(
        examples=[SLACK_ID_EXAMPLE], description="the Slack user whose rights the token carries"
    )
    token: NonEmptyStr | None = Field(
        None,
        min_length=MIN_TOKEN_CHARS,
        examples=["3f9c2a7e5b1d4c6f8a0e2b4d6f8a1c3e"],
        description="the bearer token itself (prefer tokenEnv: a file is easily shared)",
    )
    token_env: str | None = Field(
        None,
        alias="tokenEnv",
        pattern=SHELL_NAME.pattern,
        examples=["HARNESS_MCP_TOKEN_ALICE"],
        description="the environment variable holding the token, read at start",
    )

    @pydantic.model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.token is None) == (self.token_env is None):
            raise Invalid(
                "needs exactly one of `token` and `tokenEnv`",
                fix="write `{user: U012ABCDEF, tokenEnv: HARNESS_MCP_TOKEN}` and export the "
                f"token in that variable ({_MAKE_ONE})",
            )
        return self


class McpServerSection(Section):
    tokens: list[McpTokenEntry] = Field(
        [],
        examples=[[{"user": "U012ABCDEF", "tokenEnv": "HARNESS_MCP_TOKEN"}]],
        description="bearer tokens of `harness mcp --transport http`, each a Slack user's",
    )

    @pydantic.model_validator(mode="after")
    def _distinct(self) -> Self:
        seen: set[str] = set()
        for index, entry in enumerate(self.tokens):
            key = entry.token or f"${entry.token_env}"
            if key in seen:
                raise Invalid(
                    "the same token is given twice",
                    fix="give each person a token of their own",
                    at=("tokens", index),
                )
            seen.add(key)
        return self


@dataclass(frozen=True)
class McpToken:
    user: str
    token: str | None = field(default=None, repr=False)  # never in a log line
    token_env: str | None = None


@dataclass(frozen=True)
class McpServerSettings:
    tokens: tuple[McpToken, ...] = ()


def mcp_server_settings(raw: McpServerSection) -> McpServerSettings:
    return McpServerSettings(
        tuple(McpToken(entry.user, entry.token, entry.token_env) for entry in raw.tokens)
    )


def resolve_tokens(
    settings: McpServerSettings, environ: Mapping[str, str], *, file: Path
) -> dict[str, str]:
    """Each token (read from its variable for ``tokenEnv``) and its user. A ConfigError
    naming the entry when a variable is unset or its token too short, or when there is no
    token at all (an HTTP server nobody may use)."""
    tokens: dict[str, str] = {}
    for index, entry in enumerate(settings.tokens):
        token = entry.token
        if entry.token_env is not None:
            token = environ.get(entry.token_env, "").strip()
            where = f"mcpServer.tokens[{index}].tokenEnv"
            if not token:
                raise ConfigError(
                    str(file),
                    where,
                    f"${entry.token_env} is not set (the token of {entry.user})",
                    fix=f"export {entry.token_env}=... ({_MAKE_ONE}) before starting harness mcp",
                )
            if len(token) < MIN_TOKEN_CHARS:
                raise ConfigError(
                    str(file),
                    where,
                    f"${entry.token_env} holds {len(token)} characters; at least "
                    f"{MIN_TOKEN_CHARS} are needed",
                    fix=_MAKE_ONE,
                )
        assert token is not None  # the schema requires one of them
        tokens[token] = entry.user
    if not tokens:
        raise ConfigError(
            str(file),
            "mcpServer.tokens",
            "no token is configured, so nobody could use the HTTP server",
            fix="add `mcpServer: {tokens: [{user: U012ABCDEF, tokenEnv: HARNESS_MCP_TOKEN}]}` "
            "to config.yaml, or serve over stdio (the default) for yourself",
        )
    return tokens
