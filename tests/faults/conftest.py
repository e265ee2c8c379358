"""The bot suite's fixtures (the Slack emulator and the in-process bot rig) for the faults."""

from tests.bot.conftest import rig, slack

__all__ = ["rig", "slack"]
