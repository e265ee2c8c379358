"""The agents' gauges are on `harness bot`'s /metrics from its start, at 0 for each role,
before any agent runs: a dashboard or an alert on them sees the series, not a gap. The real
bot in a process against the Slack emulator."""

from __future__ import annotations

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bot.testing.slack_emulator import SlackEmulator
from harness.project import Project
from harness.testing.workers import worker_env
from tests.bot.conftest import BOT_TOKEN, SECRET, bot_process

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]


async def test_the_agent_gauges_show_0_for_each_role_before_the_first_agent(
    project: Project, slack: SlackEmulator
) -> None:
    env = {
        **worker_env({}),
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": slack.api_url,
    }
    async with bot_process(project.config.file, slack, env):
        assert slack.bot_url is not None
        url = slack.bot_url.removesuffix("/slack/events") + "/metrics"
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            text = await response.text()

    samples = {
        (sample.name, sample.labels.get("role")): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name in ("harness_agents_running", "harness_agents_queued")
    }
    expected = {
        (name, role): 0.0
        for name in ("harness_agents_running", "harness_agents_queued")
        for role in project.roles
    }
    assert samples == expected
    assert len(project.roles) >= 3
