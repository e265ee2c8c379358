"""The App Home view (pure): agents with kill buttons, what waits on the person, recent tasks
with status, branch and cost."""

from __future__ import annotations

from typing import Any

from bot.home import KILL_ACTION, render_home, task_line, waiting_on
from harness.agents.authority import Authority
from harness.agents.pool import AgentInfo
from harness.agents.questions import Question
from harness.tasks.model import PullRequest, Task, ThreadRef
from harness.testing.records import make_record

REQUESTERS = {"mine": "U1", "theirs": "U2"}


def question(qid: str, slug: str, kind: Any = "question") -> Question:
    return Question(qid, "a1", "developer", slug, f"text {qid}", (), "2026", 60.0, kind,
                    requester=REQUESTERS.get(slug))  # fmt: skip


def texts(view: dict[str, Any]) -> list[str]:
    return [b["text"]["text"] for b in view["blocks"] if b["type"] in ("section", "header")]


def test_each_live_agent_has_a_kill_button_and_its_worker() -> None:
    agents = [
        AgentInfo("a1", "developer", "paint", "/w", None, 0, "running", "t", "t", 12.0,
                  "using Bash", worker="worker-a"),
        AgentInfo("a2", "reviewer", "paint", "/w", "a1", 1, "queued", "t", None, 1.0, "starting"),
    ]  # fmt: skip

    view = render_home(agents, [], [])

    assert view["type"] == "home"
    rows = [b for b in view["blocks"] if b.get("accessory")]
    assert [r["accessory"]["value"] for r in rows] == ["a1", "a2"]
    assert {r["accessory"]["action_id"] for r in rows} == {KILL_ACTION}
    assert "on worker `worker-a`" in rows[0]["text"]["text"]
    assert "*developer* `a1` · task `paint` · 12 s · using Bash" in rows[0]["text"]["text"]


def test_waiting_questions_link_their_thread_and_tasks_show_status_branch_and_cost() -> None:
    done = make_record("a1", status="completed", cost_usd=0.25, branch="harness/paint")
    more = make_record("a2", status="failed", cost_usd=0.5)
    task = Task("paint", "2026", "Paint the page", ThreadRef("D1", "1.0"), (done, more))

    view = render_home(
        [],
        [(question("q1", "paint", "approval"), "https://slack/link")],
        [task_line(task, "https://slack/paint")],
    )

    shown = "\n".join(texts(view))
    assert "No agents are running or queued." in shown
    assert "*approve*: text q1 — <https://slack/link|in its thread>" in shown
    line = "<https://slack/paint|paint> · Paint the page · failed · branch `harness/paint` · $0.75"
    assert line in shown


def test_costs_from_the_scripted_model_are_marked_simulated_on_the_home_tab() -> None:
    simulated = make_record("a1", cost_usd=0.25, cost_simulated=True)
    paid = make_record("a2", cost_usd=0.5)
    scripted = Task("paint", "2026", "Paint", None, (simulated,))
    real = Task("fix", "2026", "Fix", None, (paid,))

    shown = "\n".join(
        texts(render_home([], [], [task_line(scripted, None), task_line(real, None)]))
    )

    assert "$0.25 (simulated)" in shown
    assert "$0.50" in shown and "$0.50 (simulated)" not in shown


def test_approvals_wait_on_the_requester_or_an_admin_and_questions_on_the_requester() -> None:
    questions = [
        question("q1", "mine", "approval"),
        question("q2", "mine"),
        question("q3", "theirs", "approval"),
        question("q4", "theirs"),
    ]
    may_decide = Authority(admins=("UADMIN",)).may_decide

    assert [q.question_id for q in waiting_on("U1", questions, may_decide)] == ["q1", "q2"]
    assert [q.question_id for q in waiting_on("UADMIN", questions, may_decide)] == [
        "q1",
        "q3",
    ]


def test_a_task_with_a_pull_request_links_it_with_how_its_checks_stand() -> None:
    done = make_record("a1", status="completed", branch="harness/paint")
    url = "https://github.com/acme/web/pull/7"
    pull = PullRequest(repository="acme/web", number=7, url=url, branch="harness/paint",
                       base="main", opened_by="alice", checks="failed")  # fmt: skip
    task = Task("paint", "2026", "Paint", None, (done,), pull_request=pull)

    shown = "\n".join(texts(render_home([], [], [task_line(task, None)])))

    assert f"branch `harness/paint` · <{url}|pull request #7> (checks failed)" in shown
