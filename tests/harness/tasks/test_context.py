from __future__ import annotations

import dataclasses

from harness.tasks.context import build_task_context
from harness.tasks.model import AgentResult, DispatchRecord, DispatchStatus, Task

BIG = 100_000


def dispatch(
    agent_id: str,
    role: str,
    started_at: str,
    status: DispatchStatus = "completed",
    result: AgentResult | None = None,
) -> DispatchRecord:
    return DispatchRecord(
        agent_id=agent_id,
        role=role,
        cwd="/work",
        model=None,
        started_at=started_at,
        status=status,
        journal_file=f"journals/{agent_id}.jsonl",
        result=result,
    )


def task(*dispatches: DispatchRecord) -> Task:
    return Task(
        slug="login-feature",
        created="2026-01-01T09:00:00Z",
        description="Build the login feature",
        dispatches=dispatches,
    )


FULL_RESULT = AgentResult(
    summary="Added the login endpoint.",
    changes=("api/login.py: new POST /login", "api/tests/test_login.py"),
    issues=("Rate limiting is not done",),
    questions=("Should sessions expire after 30 days?",),
)


# ------------------------------------------------------------------ what the context keeps


def test_empty_task_gives_the_original_request_only() -> None:
    text = build_task_context(task(), budget_chars=BIG)

    assert text == "## Task History\n\n### Original Request\nBuild the login feature"


def test_one_completed_dispatch_is_fully_formatted() -> None:
    text = build_task_context(
        task(dispatch("api-1", "api-dev", "2026-01-01T10:00:00Z", result=FULL_RESULT)),
        budget_chars=BIG,
    )

    assert text == (
        "## Task History\n\n"
        "### Original Request\nBuild the login feature\n\n"
        "### Previous Work\n\n"
        "**api-dev** (completed) · agent `api-1`\n"
        "Summary: Added the login endpoint.\n"
        "Changes:\n"
        "- api/login.py: new POST /login\n"
        "- api/tests/test_login.py\n"
        "Issues:\n"
        "- Rate limiting is not done\n"
        "**Open questions (please address):**\n"
        "- Should sessions expire after 30 days?"
    )


def test_multiple_dispatches_appear_in_chronological_order() -> None:
    text = build_task_context(
        task(
            dispatch("c", "qa-dev", "2026-01-01T12:00:00Z", result=AgentResult("third")),
            dispatch("a", "pm", "2026-01-01T10:00:00Z", result=AgentResult("first")),
            dispatch("b", "api-dev", "2026-01-01T11:00:00+00:00", result=AgentResult("second")),
        ),
        budget_chars=BIG,
    )

    assert text.index("first") < text.index("second") < text.index("third")
    assert "**pm** (completed)" in text
    assert "**qa-dev** (completed)" in text


def test_failed_dispatch_without_result_is_skipped() -> None:
    text = build_task_context(
        task(
            dispatch("ok", "api-dev", "2026-01-01T10:00:00Z", result=AgentResult("done")),
            dispatch("crash", "portal-dev", "2026-01-01T11:00:00Z", status="failed"),
            dispatch("live", "qa-dev", "2026-01-01T12:00:00Z", status="running"),
        ),
        budget_chars=BIG,
    )

    assert "portal-dev" not in text and "crash" not in text
    assert "qa-dev" not in text
    assert "**api-dev** (completed)" in text


def test_failed_dispatch_with_result_is_included_with_its_status() -> None:
    text = build_task_context(
        task(
            dispatch(
                "api-1",
                "api-dev",
                "2026-01-01T10:00:00Z",
                status="failed",
                result=AgentResult("Schema was wrong", issues=("users.email is not unique",)),
            )
        ),
        budget_chars=BIG,
    )

    assert "**api-dev** (failed) · agent `api-1`" in text
    assert "Summary: Schema was wrong" in text
    assert "- users.email is not unique" in text


def test_questions_are_highlighted() -> None:
    text = build_task_context(
        task(dispatch("pm-1", "pm", "2026-01-01T10:00:00Z", result=FULL_RESULT)),
        budget_chars=BIG,
    )

    heading = "**Open questions (please address):**"
    assert heading in text
    assert text.index(heading) < text.index("- Should sessions expire after 30 days?")


def test_result_without_lists_omits_the_empty_sections() -> None:
    text = build_task_context(
        task(dispatch("a", "dev", "2026-01-01T10:00:00Z", result=AgentResult("only this"))),
        budget_chars=BIG,
    )

    assert "Changes:" not in text and "Issues:" not in text and "questions" not in text


# ------------------------------------------------------------------ budget


def three_long_dispatches() -> Task:
    def long_result(name: str) -> AgentResult:
        return AgentResult(
            summary=f"{name} summary.",
            changes=tuple(f"{name} change {i} " + "x" * 80 for i in range(10)),
            questions=(f"{name} question?",),
        )

    return task(
        dispatch("pm-1", "pm", "2026-01-01T10:00:00Z", result=long_result("oldest")),
        dispatch("api-1", "api-dev", "2026-01-01T11:00:00Z", result=long_result("middle")),
        dispatch("qa-1", "qa-dev", "2026-01-01T12:00:00Z", result=long_result("newest")),
    )


def test_text_within_budget_is_not_shortened() -> None:
    full = build_task_context(three_long_dispatches(), budget_chars=BIG)

    assert build_task_context(three_long_dispatches(), budget_chars=len(full)) == full
    assert "Shortened" not in full


def test_over_budget_shortens_only_the_oldest_result_to_its_summary() -> None:
    full = build_task_context(three_long_dispatches(), budget_chars=BIG)

    text = build_task_context(three_long_dispatches(), budget_chars=len(full) - 100)

    assert len(text) <= len(full) - 100
    assert "oldest summary." in text
    assert "oldest change" not in text and "oldest question?" not in text
    assert "middle change 9" in text and "newest change 9" in text
    assert (
        "_Shortened to fit the context budget: the results of pm (agent `pm-1`) show their "
        "summary only. The full results are in `harness show login-feature`._"
    ) in text


def test_tighter_budget_shortens_older_results_one_at_a_time() -> None:
    full = build_task_context(three_long_dispatches(), budget_chars=BIG)

    text = build_task_context(three_long_dispatches(), budget_chars=len(full) - 1500)

    assert "pm (agent `pm-1`), api-dev (agent `api-1`) show their summary only" in text
    assert "middle change" not in text
    assert "newest change 9" in text
    assert "- newest question?" in text


def test_budget_too_small_for_all_summaries_cuts_the_oldest_summary_with_a_marker() -> None:
    long_summary = "A" * 1000
    the_task = task(
        dispatch("pm-1", "pm", "2026-01-01T10:00:00Z", result=AgentResult(long_summary)),
        dispatch("dev-1", "dev", "2026-01-01T11:00:00Z", result=AgentResult("B" * 300)),
    )

    text = build_task_context(the_task, budget_chars=1000)

    assert len(text) <= 1000
    assert "B" * 300 in text  # the newest summary is untouched
    kept = text.count("A")
    assert "characters cut to fit the context budget" in text
    assert f"[… {1000 - kept} characters cut" in text
    assert "`harness show login-feature`" in text


def test_cutting_continues_into_newer_summaries_when_needed() -> None:
    the_task = task(
        dispatch("pm-1", "pm", "2026-01-01T10:00:00Z", result=AgentResult("A" * 400)),
        dispatch("dev-1", "dev", "2026-01-01T11:00:00Z", result=AgentResult("B" * 400)),
    )

    text = build_task_context(the_task, budget_chars=600)

    assert len(text) <= 600
    assert "Summary: [… 400 characters cut" in text
    assert text.count("characters cut") == 2


def test_original_request_is_never_cut_even_over_budget() -> None:
    the_task = Task(
        slug="big",
        created="2026-01-01T09:00:00Z",
        description="R" * 500,
        dispatches=(dispatch("a", "dev", "2026-01-01T10:00:00Z", result=AgentResult("S" * 50)),),
    )

    text = build_task_context(the_task, budget_chars=100)

    assert "R" * 500 in text
    assert "[… 50 characters cut" in text


def test_the_context_names_the_tasks_git_branch_when_it_has_one() -> None:
    worked = dataclasses.replace(
        dispatch("a1", "developer", "2026-01-01T10:00:00Z", result=FULL_RESULT),
        branch="harness/login-feature",
    )
    text = build_task_context(task(worked), budget_chars=BIG)
    assert "### Workspace\nThe task's work is on git branch `harness/login-feature`." in text
    plain = build_task_context(task(), budget_chars=BIG)
    assert "### Workspace" not in plain
