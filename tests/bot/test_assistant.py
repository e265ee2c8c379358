"""The assistant thread's words: suggested prompts from the roles, and the status line."""

from __future__ import annotations

from bot.assistant import assistant_status, in_assistant_thread, suggested_prompts
from harness.agents.pool import AgentInfo, AgentState
from harness.config.roles import Role
from harness.tasks.model import ThreadRef


def role(name: str, example: str | None) -> Role:
    return Role(name, name.title(), "worker", "prompt", f"{name}.md", example=example)


def live(activity: str, status: AgentState = "running") -> AgentInfo:
    return AgentInfo("a1", "developer", "t", "/w", None, 0, status, "2026", "2026", 3.0, activity)


def test_each_role_with_an_example_is_a_suggested_prompt_at_most_four() -> None:
    roles = {
        "analyst": role("analyst", "plan: a settings page"),
        "quiet": role("quiet", None),
        **{f"r{n}": role(f"r{n}", f"do thing {n}") for n in range(5)},
    }

    prompts = suggested_prompts(roles)

    assert prompts[0] == {"title": "Analyst: plan: a settings page",
                          "message": "plan: a settings page"}  # fmt: skip
    assert [p["message"] for p in prompts[1:]] == ["do thing 0", "do thing 1", "do thing 2"]


def test_the_status_line_says_what_the_agent_does_in_words() -> None:
    assert assistant_status(live("using Bash")) == "is running a command…"
    assert assistant_status(live("using Edit")) == "is editing files…"
    assert assistant_status(live("waiting for approval")) == "is waiting for your approval…"
    assert assistant_status(live("waiting for an answer: colour?")) == "is waiting for your answer…"
    assert assistant_status(live("waiting for agent a2")) == "is waiting for the agents it drafted…"
    assert assistant_status(live("writing")) == "is writing…"
    assert assistant_status(live("starting", "queued")) == "is waiting for a free agent…"
    assert assistant_status(live("running the tests (40%)")) == (
        "is working: running the tests (40%)"
    )
    assert assistant_status(live("using SomeNewTool")) == "is working…"


def test_only_direct_messages_are_assistant_threads() -> None:
    assert in_assistant_thread(ThreadRef("D1", "1.0"))
    assert not in_assistant_thread(ThreadRef("C1", "1.0"))
