"""The team's notes in an agent's prompt: first, within half the context budget, with a
marker where they were cut; the task's history in what is left."""

from __future__ import annotations

from harness.memory.model import Note
from harness.tasks.context import MEMORY_HEADING, compose_prompt, memory_section
from harness.tasks.model import AgentResult, DispatchRecord, Task

BIG = 100_000


def note(text: str, scope: str = "channel:C1") -> Note:
    return Note("n1", text, scope, "U1", "2026-01-01T10:00:00.000Z")


def task(*, summary: str | None = None) -> Task:
    dispatches: tuple[DispatchRecord, ...] = ()
    if summary is not None:
        record = DispatchRecord(
            agent_id="a1",
            role="developer",
            started_at="2026-01-01T10:00:00Z",
            status="completed",
            result=AgentResult(summary=summary),
        )
        dispatches = (record,)
    return Task("t", "2026-01-01T09:00:00Z", "Fix the login", dispatches=dispatches)


def test_a_first_agent_gets_the_notes_then_its_assignment() -> None:
    notes = [note("tests: make check", "repository:web"), note("answer in French")]

    prompt = compose_prompt(task(), "Fix the login", budget_chars=BIG, notes=notes)

    assert prompt == (
        f"{MEMORY_HEADING}\n"
        "Notes the team keeps for this channel and repository (people wrote or kept each one): "
        "follow them unless your assignment says otherwise.\n"
        "- (repository `web`) tests: make check\n"
        "- (this channel) answer in French\n\n"
        "## Your Assignment\n\nFix the login"
    )


def test_without_notes_the_prompt_is_as_before() -> None:
    assert compose_prompt(task(), "Fix the login", budget_chars=BIG) == "Fix the login"


def test_a_follow_up_gets_the_notes_before_the_history() -> None:
    prompt = compose_prompt(
        task(summary="Fixed it."), "Now the logout", budget_chars=BIG, notes=[note("use pnpm")]
    )

    memory, history, assignment = (
        prompt.index(MEMORY_HEADING),
        prompt.index("## Task History"),
        prompt.index("## Your Assignment"),
    )
    assert memory < history < assignment
    assert "Fixed it." in prompt and "- (this channel) use pnpm" in prompt


def test_notes_past_the_budget_are_cut_at_the_end_and_the_marker_says_how_many() -> None:
    notes = [note(f"note number {i}: " + "x" * 80) for i in range(10)]

    text = memory_section(notes, budget_chars=600)

    assert len(text) <= 600
    assert "note number 0:" in text and "note number 9:" not in text
    kept = sum(f"note number {i}:" in text for i in range(10))
    assert text.endswith(f"[… {10 - kept} more note(s), {(10 - kept) * 95} characters, cut here "
                         "to fit the context budget]")  # fmt: skip


def test_the_notes_take_at_most_half_the_budget_and_the_history_keeps_the_rest() -> None:
    notes = [note("y" * 400) for _ in range(10)]
    summary = "z" * 1500

    prompt = compose_prompt(task(summary=summary), "go on", budget_chars=4000, notes=notes)

    memory = prompt[: prompt.index("## Task History")]
    assert len(memory) <= 2000 + 2
    assert "cut here to fit the context budget" in memory
    assert summary in prompt  # the history still fits whole in what is left
