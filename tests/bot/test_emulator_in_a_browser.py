"""``harness bot --emulator`` in a real browser: the command started as a person starts it, its
page opened in headless chromium, a DM answered by the agents (the real Claude Code CLI on the
scripted model), a button clicked, a slash command run and the Home tab opened."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from bot.testing.emulator_browser import emulator_process, launch

# The agents' first answer includes starting the Claude Code CLI: seconds, more on a busy
# machine.
ANSWER = 120_000  # ms
SHOWN = 20_000  # ms: what the page shows once the emulator has it


@pytest.mark.subprocess
def test_a_dm_in_the_browser_gets_the_agents_answer_and_its_buttons_commands_and_home_work(
    project_dir: Path,
) -> None:
    with emulator_process(project_dir / "config.yaml") as bot, sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(bot.url)
            expect(page.locator("#main-header")).to_have_text("harness", timeout=SHOWN)

            page.locator("#composer-text").fill("plan: a settings page")
            page.locator("#composer-text").press("Enter")

            # The question shows in the DM, and its thread opens with the agents' answer.
            expect(page.locator("#messages")).to_contain_text("plan: a settings page")
            thread = page.locator("#thread-messages")
            answer = thread.locator(".msg", has_text="product-analyst finished")
            expect(answer).to_contain_text("✅ product-analyst finished", timeout=ANSWER)
            expect(answer).to_contain_text("Plan for plan: a settings page")
            expect(thread).to_contain_text("developer finished")

            good = answer.get_by_role("button", name="Good result")
            good.click()
            expect(good).to_have_class("action clicked", timeout=SHOWN)
            bot.wait_for_output("feedback from UYOU", timeout=SHOWN / 1000)
            task = json.loads(
                (project_dir / ".agents/tasks/plan-a-settings-page/task.json").read_text()
            )
            feedback = [d.get("feedback") for d in task["dispatches"] if d.get("feedback")]
            assert [(f["user"], f["value"]) for f in feedback[0]] == [("UYOU", "good")], feedback

            page.locator("#composer-text").fill("/harness tasks")
            page.locator("#composer-text").press("Enter")
            only_you = page.locator("#messages .ephemeral")
            expect(only_you).to_contain_text("Only visible to you", timeout=SHOWN)
            expect(only_you).to_contain_text("plan-a-settings-page")

            page.locator("#nav-home").click()
            home = page.locator("#home")
            expect(home).to_contain_text("Recent tasks", timeout=SHOWN)
            expect(home).to_contain_text("plan-a-settings-page")
        finally:
            browser.close()
    assert "harness bot --emulator: stopped" in bot.output
