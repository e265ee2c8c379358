"""Who may use the bot. Pure checks over config.slack. (Who may stop an agent, approve
what it runs or see a task is the core's to say: ``harness/agents/authority.py``,
``harness/agents/visibility.py``.)

Empty allowlists mean everyone / every channel. The channel allowlist applies to channels
(public or private); a DM is governed by the user allowlist alone, since DM channel ids are
per person and could not be listed in advance.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.config.settings import SlackSettings

REFUSAL = (
    "Sorry, I can't take requests from you here: this harness only works for the people "
    "and channels its admins have allowed. Ask an admin to add you to `slack.allowedUsers`."
)
CHANNEL_REFUSAL = (
    "Sorry, I don't work in this channel: this harness is limited to the channels in "
    "`slack.allowedChannels`. Try one of those, or message me directly."
)


@dataclass(frozen=True)
class Refusal:
    text: str


def check_access(
    settings: SlackSettings, user: str, channel: str, *, is_dm: bool
) -> Refusal | None:
    """None when ``user`` may use the bot in ``channel``; else the polite refusal to show."""
    allowed = user in settings.allowed_users or user in settings.admins
    if settings.allowed_users and not allowed:
        return Refusal(REFUSAL)
    if settings.allowed_channels and not is_dm and channel not in settings.allowed_channels:
        return Refusal(CHANNEL_REFUSAL)
    return None
