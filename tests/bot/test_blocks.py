"""Block Kit rendering: pure functions over literal records."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest

from bot.blocks import (
    MAX_BLOCKS,
    SECTION_LIMIT,
    SlackMessage,
    clean_error,
    drafted_intro,
    escape,
    failure_message,
    pack,
    render_record,
    split_text,
    status_text,
    waiting_text,
)
from harness.tasks.model import AgentResult, DispatchRecord

RECORD = DispatchRecord(
    agent_id="a1b2c3",
    role="developer",
    cwd="/w",
    model=None,
    started_at="2026-01-01T00:00:00Z",
    status="completed",
    journal_file="journals/a1b2c3.jsonl",
    duration_ms=12_300,
    cost_usd=0.0123,
    turns=3,
    result=AgentResult(
        summary="Added <b> & fixed",
        changes=("a.py", "b.py"),
        issues=("flaky",),
        questions=("Ship it?", "Which branch?"),
    ),
)


def sections(messages: Sequence[SlackMessage]) -> list[str]:
    return [b["text"]["text"] for m in messages for b in m["blocks"] if b["type"] == "section"]


def context_text(message: SlackMessage) -> str:
    block = message["blocks"][-1]
    assert block["type"] == "context"
    return block["elements"][0]["text"]


def test_a_completed_result_shows_role_status_summary_lists_questions_and_usage() -> None:
    [message] = render_record(RECORD, task_slug="add-a-page")
    blocks = message["blocks"]
    assert [b["type"] for b in blocks] == ["section"] * 5 + ["context"]
    assert sections([message]) == [
        "✅ *developer* finished",
        "Added &lt;b&gt; &amp; fixed",
        "*Changes*\n• a.py\n• b.py",
        "*Issues*\n• flaky",
        "*Questions* (reply in this thread to answer)\n1. Ship it?\n2. Which branch?",
    ]
    assert context_text(message) == (
        "agent `a1b2c3` · task `add-a-page` · 12.3 s · $0.0123 · 3 turns"
    )
    assert message["text"].startswith("✅ *developer* finished\nAdded &lt;b&gt; &amp; fixed")


def test_work_in_a_git_workspace_shows_its_branch_head_and_diff_stat() -> None:
    worked = dataclasses.replace(
        RECORD,
        branch="harness/add-a-page",
        head_commit="0123456789abcdef",
        diff_stat=" page.py | 4 ++--\n 1 file changed, 2 insertions(+), 2 deletions(-)",
    )
    shown = sections(render_record(worked))
    assert (
        "*Branch* `harness/add-a-page` at `0123456789ab`\n"
        "```page.py | 4 ++--\n 1 file changed, 2 insertions(+), 2 deletions(-)```"
    ) in shown


def test_a_short_diff_is_shown_in_the_result_and_a_long_one_is_announced_as_a_file() -> None:
    worked = dataclasses.replace(RECORD, branch="harness/add-a-page", diff_stat=" 1 file changed")
    short = "--- a/page.py\n+++ b/page.py\n+x = 1 < 2\n"
    long = "".join(f"+line {n}\n" for n in range(200))

    inline = "\n".join(sections(render_record(worked, task_slug="add-a-page", diff=short)))
    announced = "\n".join(sections(render_record(worked, task_slug="add-a-page", diff=long)))

    assert "*Diff*\n```--- a/page.py\n+++ b/page.py\n+x = 1 &lt; 2```" in inline
    assert "+line 0" not in announced
    assert f"follows as the file `add-a-page-{RECORD.agent_id}.diff`" in announced


def test_a_failure_says_what_failed_which_agent_and_what_to_do_never_a_traceback() -> None:
    failed = dataclasses.replace(
        RECORD,
        status="failed",
        result=None,
        error="the CLI failed: boom\nTraceback (most recent call last):\n  File x.py",
        last_text="I was about to <edit>",
    )
    text = "\n".join(sections(render_record(failed, task_slug="t")))
    assert "❌ *developer* failed (agent `a1b2c3`)" in text
    assert "*What failed:* the CLI failed: boom" in text
    assert "Traceback" not in text and "x.py" not in text
    assert "> I was about to &lt;edit&gt;" in text
    assert "*What to do next:* reply in this thread to try again" in text
    assert "`harness show t`" in text


@pytest.mark.parametrize(
    ("status", "words"),
    [
        ("killed", "⏹️ *developer* was stopped by <@U1> (agent `a1b2c3`)"),
        ("interrupted", "⏸️ *developer* was interrupted (agent `a1b2c3`)"),
    ],
)
def test_stopped_and_interrupted_runs(status: str, words: str) -> None:
    record = dataclasses.replace(RECORD, status=status, result=None, error="the harness shut down")  # type: ignore[arg-type]
    text = "\n".join(sections(render_record(record, stopped_by="U1")))
    assert words in text
    assert "*What to do next:*" in text


def test_a_drafted_result_names_who_drafted_it() -> None:
    [message] = render_record(RECORD, drafted_by="product-analyst a9f9f9")
    assert sections([message])[0] == "✅ *developer* finished · drafted by product-analyst a9f9f9"


def test_split_text_joins_back_exactly_and_never_cuts_an_entity() -> None:
    text = escape("<&>" * 2000)  # 10,000+ characters of entities, no spaces
    chunks = split_text(text, 100)
    assert "".join(chunks) == text
    assert all(len(c) <= 100 for c in chunks)
    for chunk in chunks:
        assert chunk.startswith("&") and chunk.endswith(";")
    words = "word " * 1000
    assert all(c.endswith(" ") for c in split_text(words, 333)[:-1])
    assert split_text("", 10) == [""]


def test_pack_splits_long_text_over_messages_within_slack_limits() -> None:
    pieces = ["header", "x" * 9000, "\n".join(f"• item {i}" for i in range(300))]
    messages = pack(pieces, "agent `a1`")
    assert len(messages) >= 4
    joined = "".join(sections(messages))
    assert "x" * 9000 in joined and "• item 299" in joined
    for number, message in enumerate(messages, 1):
        assert len(message["blocks"]) <= MAX_BLOCKS
        assert len(message["text"]) < 4000
        assert all(len(s) <= SECTION_LIMIT for s in sections([message]))
        assert context_text(message).startswith(f"part {number} of {len(messages)}")
    assert context_text(messages[-1]).endswith("agent `a1`")
    many = pack([f"p{i}" for i in range(120)], "")
    assert all(len(m["blocks"]) <= MAX_BLOCKS for m in many)
    assert len(sections(many)) == 120


def test_status_lines() -> None:
    assert (
        status_text(
            "developer", "a1b2c3", state="running", elapsed_seconds=12.7, activity="using Edit"
        )
        == "⚙️ developer is working… agent a1b2c3, 12 s, using Edit"
    )
    assert (
        status_text(
            "developer", "a1b2c3", state="queued", elapsed_seconds=0, activity="waiting for a slot"
        )
        == "⏳ developer is queued… agent a1b2c3, 0 s, waiting for a slot"
    )
    intro = drafted_intro("product-analyst", "a9", "developer", "a1", "Build <it> & ship")
    assert (
        intro == "🤖 product-analyst `a9` drafted *developer* `a1`: “Build &lt;it&gt; &amp; ship”"
    )
    assert waiting_text([("developer", "a1")]).startswith("⏳ Got it. developer `a1` is still")


def test_failure_message_and_clean_error() -> None:
    message = failure_message("could not create <task>", next_step="try again", agent_id="a1")
    assert message["text"] == (
        "❌ could not create &lt;task&gt;\nAgent: `a1`\n*What to do next:* try again"
    )
    assert clean_error("Traceback (most recent call last):\n boom") == "an internal error"
    assert len(clean_error("x " * 2000)) <= 800
