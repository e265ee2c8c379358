"""config.yaml's ``slack:`` section: who may use the bot and where, who its admins are, and
the files a request may attach (``files``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import Field

from harness.config.section import Section
from harness.config.slack_ids import SLACK_ID_EXAMPLE, ChannelId, UserId


class SlackFiles(Section):
    max_bytes: int = Field(
        10 * 1024 * 1024,
        alias="maxBytes",
        ge=1,
        examples=[10_485_760],
        description="bytes: the largest file a request may attach or an agent may share",
    )
    max_count: int = Field(
        10,
        alias="maxCount",
        ge=0,
        examples=[10],
        description="files per message (0: attached files are left out)",
    )


class SlackSection(Section):
    allowed_users: list[UserId] = Field(
        [], alias="allowedUsers", examples=[[SLACK_ID_EXAMPLE]], description="empty: everyone"
    )
    allowed_channels: list[ChannelId] = Field(
        [], alias="allowedChannels", examples=[["C012ABCDEF"]], description="empty: every channel"
    )
    admins: list[UserId] = Field(
        [],
        examples=[[SLACK_ID_EXAMPLE]],
        description="decide any task's approvals, stop any agent and see every task",
    )
    files: SlackFiles = Field(default_factory=lambda: SlackFiles.model_validate({}))


@dataclass(frozen=True)
class FileLimits:
    """What a request may attach (per file, per message), and what an agent may share."""

    max_bytes: int = 10 * 1024 * 1024
    max_count: int = 10


@dataclass(frozen=True)
class SlackSettings:
    allowed_users: tuple[str, ...] = ()  # empty: everyone
    allowed_channels: tuple[str, ...] = ()  # empty: every channel
    admins: tuple[str, ...] = ()
    files: FileLimits = field(default_factory=FileLimits)


def slack_settings(raw: SlackSection) -> SlackSettings:
    return SlackSettings(
        allowed_users=tuple(raw.allowed_users),
        allowed_channels=tuple(raw.allowed_channels),
        admins=tuple(raw.admins),
        files=FileLimits(raw.files.max_bytes, raw.files.max_count),
    )
