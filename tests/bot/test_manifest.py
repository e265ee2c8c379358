"""manifest.yml: what Slack needs to create the app from it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from bot.surfaces import PLAN_SHORTCUT, SHORTCUT

MANIFEST = Path(__file__).resolve().parents[2] / "manifest.yml"


def load() -> dict[str, Any]:
    data = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_the_manifest_subscribes_to_the_events_the_bot_handles() -> None:
    settings = load()["settings"]
    assert sorted(settings["event_subscriptions"]["bot_events"]) == [
        "agent_session_stopped",
        "app_home_opened",
        "app_mention",
        "assistant_thread_context_changed",
        "assistant_thread_started",
        "message.channels",
        "message.groups",
        "message.im",
    ]
    assert settings["socket_mode_enabled"] is True
    assert settings["interactivity"]["is_enabled"] is True


def test_the_manifest_grants_the_scopes_of_every_call_the_bot_makes() -> None:
    manifest = load()
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    assert {
        "app_mentions:read",
        "channels:history",
        "groups:history",
        "im:history",
        "chat:write",
        "reactions:write",
        "files:read",
        "files:write",
        "commands",
        "assistant:write",
    } <= scopes
    [command] = manifest["features"]["slash_commands"]
    assert command["command"] == "/harness"
    assert "kill <agentId>" in command["usage_hint"]
    home = manifest["features"]["app_home"]
    assert home["messages_tab_enabled"] is True
    assert home["messages_tab_read_only_enabled"] is False
    assert home["home_tab_enabled"] is True
    assert manifest["features"]["assistant_view"]["assistant_description"]
    assert manifest["features"]["agent_view"]["agent_description"]  # sessions: an agent app
    send, plan = manifest["features"]["shortcuts"]
    assert (send["type"], send["callback_id"]) == ("message", SHORTCUT)
    assert (plan["type"], plan["callback_id"]) == ("message", PLAN_SHORTCUT)
    assert manifest["features"]["bot_user"]["display_name"]
    assert len(manifest["display_information"]["name"]) <= 35
