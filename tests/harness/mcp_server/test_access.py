"""Who calls ``harness mcp``: the local user over stdio acts as the harness itself and looks
at tasks as the operator (who sees every one, ``tests/harness/agents/test_visibility.py``); a
Slack user over HTTP acts and looks as themselves."""

from __future__ import annotations

from harness.agents.visibility import OPERATOR
from harness.mcp_server.access import Person


def test_the_local_user_is_the_operator_and_a_slack_user_is_themselves() -> None:
    local = Person(None, "alice")
    assert (local.local, local.by, local.viewer) == (True, None, OPERATOR)
    slack = Person("UBOB", "UBOB")
    assert (slack.local, slack.by, slack.viewer) == (False, "UBOB", "UBOB")
