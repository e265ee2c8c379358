"""Slack ids in config.yaml (``slack:``, ``workspaces.channels``, ``mcpServer.tokens``): ids,
not names, for a name can change and two people can share one."""

from __future__ import annotations

import re
from typing import Annotated

import pydantic

from harness.problems import Invalid

SLACK_ID_EXAMPLE = "U012ABCDEF"

# A user id starts U (W on Enterprise Grid), a channel id C, G (an old private channel) or D
# (a direct message); the rest is uppercase letters and digits.
_USER_ID = re.compile(r"^[UW][A-Z0-9]+$")
_CHANNEL_ID = re.compile(r"^[CGD][A-Z0-9]+$")
_FIND_USER_ID = (
    "write the member id, e.g. `U012ABCDEF`, not a name or email: in Slack open the person's "
    "profile > ⋮ (More) > Copy member ID"
)
_FIND_CHANNEL_ID = (
    "write the channel id, e.g. `C012ABCDEF`, not its name: in Slack open the channel's "
    "details (click its name); the id is at the bottom of the About tab"
)


def user_id_problem(value: str) -> str | None:
    """Why ``value`` is not a Slack user id; None when it is one."""
    return None if _USER_ID.match(value) else f"{value!r} is not a Slack user id"


def channel_id_problem(value: str) -> str | None:
    """Why ``value`` is not a Slack channel id; None when it is one."""
    return None if _CHANNEL_ID.match(value) else f"{value!r} is not a Slack channel id"


def _user_id(value: str) -> str:
    if (problem := user_id_problem(value)) is not None:
        raise Invalid(problem, fix=_FIND_USER_ID)
    return value


def _channel_id(value: str) -> str:
    if (problem := channel_id_problem(value)) is not None:
        raise Invalid(problem, fix=_FIND_CHANNEL_ID)
    return value


UserId = Annotated[str, pydantic.AfterValidator(_user_id)]
ChannelId = Annotated[str, pydantic.AfterValidator(_channel_id)]
