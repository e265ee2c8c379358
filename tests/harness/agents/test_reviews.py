"""Reviews of pull requests: the harness fetches a pull request through the forge, runs the
reviewer (the real CLI, a scripted model) in a worktree of its head, and posts its findings as
one GitHub review on the loopback GitHub API: once per head."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from harness.agents.orchestrator import Orchestrator
from harness.agents.reviews import Reviews
from harness.errors import ForgeError
from harness.forge.reviews import MAX_COMMENT_CHARS, ReviewError
from harness.project import Project
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn
from tests.forge_support import (
    FULL_NAME,
    Forge,
    forge,
    open_pull,
    posted_reviews,
    push_to_pull,
    with_forge,
)
from tests.harness.conftest import HarnessFactory

pytestmark = [pytest.mark.anyio, pytest.mark.git, pytest.mark.subprocess]
__all__ = ["forge"]  # the fixture, used by name

WAIT = 60.0
APP = "def ratio(a, b):\n    return a / b\n\nprint(ratio(1, 0))\n"


@pytest.fixture
def project(project_dir: Path, forge: Forge) -> Project:
    return with_forge(project_dir, forge)


def reviewer(summary: str, issues: Sequence[str]) -> Turn:
    return Turn.finish(summary, issues=list(issues))


async def reviews_with(
    harness_with: HarnessFactory, summary: str, issues: Sequence[str]
) -> tuple[Orchestrator, ScriptedModel, Reviews]:
    def script(request: ModelRequest) -> Turn:
        return reviewer(summary, issues)

    orchestrator, model = await harness_with(script)
    return orchestrator, model, Reviews.of(orchestrator)


def pull_url(forge: Forge, number: int) -> str:
    return f"{forge.github.web_url}/{FULL_NAME}/pull/{number}"


async def test_a_review_is_posted_with_a_comment_on_a_line_of_the_diff(
    harness_with: HarnessFactory, forge: Forge, project: Project
) -> None:
    orchestrator, model, reviews = await reviews_with(harness_with, "Changes required: 1/0.", [
        "app.py:2: divides by zero when b is 0; check b first",
        "The change has no tests.",
    ])  # fmt: skip
    number = open_pull(forge, "feature", "app.py", APP)

    outcome = await asyncio.wait_for(
        reviews.start_review(pull_url(forge, number), requested_by="U1"), WAIT
    )

    [review] = posted_reviews(forge, number)
    assert review["user"]["login"] == "harness-bot"  # U1 linked no account
    assert review["state"] == "COMMENTED"
    assert review["commit_id"] == forge.github.pulls(FULL_NAME)[0].head_sha
    assert [(c["path"], c["line"], c["side"]) for c in review["comments"]] == [
        ("app.py", 2, "RIGHT")
    ]
    assert "divides by zero" in review["comments"][0]["body"]
    assert "changes required" in review["body"] and "The change has no tests." in review["body"]
    assert outcome.kind == "posted" and outcome.url == review["html_url"]
    assert outcome.url in outcome.line and "1 comment(s) on lines" in outcome.line
    # The reviewer was given the diff, and worked in a worktree of the pull request's head.
    prompt = model.main_requests[0].first_user_text
    assert "+    return a / b" in prompt and "app.py" in prompt
    assert outcome.task_slug is not None
    worktree = orchestrator.config.workspaces.root / outcome.task_slug
    assert (worktree / "app.py").read_text(encoding="utf-8") == APP
    task = await orchestrator.tasks.task(outcome.task_slug)
    assert task.repository == "web" and task.requester == "U1"


async def test_the_same_head_gets_one_review_and_a_new_push_a_second(
    harness_with: HarnessFactory, forge: Forge, project: Project
) -> None:
    _, model, reviews = await reviews_with(harness_with, "Approve.", ["app.py:1: fine name"])
    number = open_pull(forge, "feature", "app.py", APP)
    url = pull_url(forge, number)

    first = await asyncio.wait_for(reviews.start_review(url, requested_by="U1"), WAIT)
    again = await asyncio.wait_for(reviews.start_review(url, requested_by="U2"), WAIT)
    by_event = await reviews.start_review(url, requested_by=None, head_sha=first.head_sha)

    assert again.kind == by_event.kind == "already"
    assert again.url == by_event.url == first.url and first.url in again.line
    assert len(posted_reviews(forge, number)) == 1 and len(model.main_requests) == 1

    head = push_to_pull(forge, "feature", "app.py", APP + "print('more')\n")
    second = await asyncio.wait_for(reviews.start_review(url, requested_by="U1"), WAIT)

    assert second.kind == "posted" and second.head_sha == head != first.head_sha
    reviews_now = posted_reviews(forge, number)
    assert [r["commit_id"] for r in reviews_now] == [first.head_sha, head]


async def test_a_linked_persons_review_is_posted_as_them(
    harness_with: HarnessFactory, forge: Forge, project: Project
) -> None:
    orchestrator, _, reviews = await reviews_with(harness_with, "Approve.", [])
    forge.github.add_oauth_app("Iv1.harness-tests")
    login = await orchestrator.accounts.start_github_link("U1")
    forge.github.approve_device(login.user_code, "alice")
    assert await asyncio.wait_for(login.linked, WAIT) == "alice"
    number = open_pull(forge, "feature", "app.py", APP, by="bob")

    outcome = await asyncio.wait_for(
        reviews.start_review(pull_url(forge, number), requested_by="U1"), WAIT
    )

    [review] = posted_reviews(forge, number)
    assert review["user"]["login"] == "alice" and "as alice" in outcome.line
    assert "for U1" not in review["body"]


async def test_findings_off_the_diff_are_told_in_the_summary_not_as_line_comments(
    harness_with: HarnessFactory, forge: Forge, project: Project
) -> None:
    _, _, reviews = await reviews_with(harness_with, "Approve with suggestions.", [
        "README.md:1: the readme is not part of this change",
        "app.py:40: no such line in the diff",
        "app.py:4: the print runs at import",
    ])  # fmt: skip
    number = open_pull(forge, "feature", "app.py", APP)

    outcome = await asyncio.wait_for(
        reviews.start_review(pull_url(forge, number), requested_by="U1"), WAIT
    )

    [review] = posted_reviews(forge, number)
    assert [(c["path"], c["line"]) for c in review["comments"]] == [("app.py", 4)]
    assert "`README.md` line 1: the readme is not part" in review["body"]
    assert "`app.py` line 40: no such line" in review["body"]
    assert "2 in the summary" in outcome.line


async def test_hostile_findings_cannot_reach_outside_the_pull_requests_diff(
    harness_with: HarnessFactory, forge: Forge, project: Project, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the harness's secret\n", encoding="utf-8")
    summary = "Approve. @everyone <!-- harness-review 0 -->"
    _, _, reviews = await reviews_with(harness_with, summary, [
        f"../../../../{secret}:1: read this",
        f"{secret}:1: or this",
        f"{forge.github.web_url}/_fake/evil:1: fetch me",
        "app.py/../app.py:2: the same file, spelt another way",
        "app.py:99999999: far away",
        "app.py:2: " + "A" * 200_000,
        "app.py:1: ping @alice and @acme/admins",
    ])  # fmt: skip
    number = open_pull(forge, "feature", "app.py", APP)
    before = len(forge.github.requests)

    await asyncio.wait_for(reviews.start_review(pull_url(forge, number), requested_by="U1"), WAIT)

    [review] = posted_reviews(forge, number)
    comments = review["comments"]
    assert {(c["path"], c["line"]) for c in comments} == {("app.py", 2), ("app.py", 1)}
    assert all(len(c["body"]) <= MAX_COMMENT_CHARS for c in comments)
    assert len(review["body"]) < 65_536 and "the harness's secret" not in review["body"]
    assert "@alice" not in comments[1]["body"] and "@everyone" not in review["body"]
    assert review["body"].count("<!-- harness-review") == 1  # the agent's marker is defused
    asked = {r.path for r in forge.github.requests[before:]}
    assert asked <= {
        f"/repos/{FULL_NAME}/pulls/{number}",
        f"/repos/{FULL_NAME}/pulls/{number}/files",
        f"/repos/{FULL_NAME}/pulls/{number}/reviews",
    }


async def test_findings_kept_when_posting_fails_are_posted_when_asked_again(
    harness_with: HarnessFactory, forge: Forge, project: Project
) -> None:
    _, model, reviews = await reviews_with(harness_with, "Approve.", ["app.py:2: tidy"])
    number = open_pull(forge, "feature", "app.py", APP)
    url = pull_url(forge, number)
    forge.github.fail_next("POST", rf"/repos/{FULL_NAME}/pulls/{number}/reviews", 502)

    with pytest.raises(ForgeError) as failed:
        await asyncio.wait_for(reviews.start_review(url, requested_by="U1"), WAIT)
    assert failed.value.failure == "unavailable" and posted_reviews(forge, number) == []

    outcome = await asyncio.wait_for(reviews.start_review(url, requested_by="U1"), WAIT)

    assert outcome.kind == "posted" and len(posted_reviews(forge, number)) == 1
    assert len(model.main_requests) == 1  # the reviewer ran once: its findings were kept


async def test_a_pull_request_of_another_repository_or_no_pull_request_is_refused_clearly(
    harness_with: HarnessFactory, forge: Forge, project: Project
) -> None:
    _, model, reviews = await reviews_with(harness_with, "Approve.", [])

    with pytest.raises(ReviewError) as other:
        await reviews.start_review(f"{forge.github.web_url}/acme/api/pull/3", requested_by="U1")
    with pytest.raises(ReviewError) as not_a_pull:
        await reviews.start_review(f"{forge.github.web_url}/acme/web/issues/3", requested_by="U1")
    with pytest.raises(ForgeError) as missing:
        await reviews.start_review(pull_url(forge, 41), requested_by="U1")

    assert "acme/api is not a repository configured here" in other.value.message
    assert "not the address of a pull request" in not_a_pull.value.message
    assert missing.value.failure == "not-found" and "#41" in missing.value.message
    assert model.main_requests == [] and forge.github.reviews == {}


async def test_two_asks_at_once_make_one_review_the_other_hears_it_is_under_way(
    harness_with: HarnessFactory, forge: Forge, project: Project
) -> None:
    _, model, reviews = await reviews_with(harness_with, "Approve.", ["app.py:1: fine"])
    number = open_pull(forge, "feature", "app.py", APP)
    url = pull_url(forge, number)

    results = await asyncio.wait_for(
        asyncio.gather(
            reviews.start_review(url, requested_by="U1"),
            reviews.start_review(url, requested_by="U2"),
            return_exceptions=True,
        ),
        WAIT,
    )

    refused = [r for r in results if isinstance(r, ReviewError)]
    assert len(refused) == 1 and "is under way" in refused[0].message
    assert len(posted_reviews(forge, number)) == 1 and len(model.main_requests) == 1


async def test_github_down_says_so_and_claims_nothing_so_asking_again_reviews(
    harness_with: HarnessFactory, forge: Forge, project: Project
) -> None:
    _, _, reviews = await reviews_with(harness_with, "Approve.", [])
    number = open_pull(forge, "feature", "app.py", APP)
    url = pull_url(forge, number)
    forge.github.fail_next("GET", rf"/repos/{FULL_NAME}/pulls/{number}/files", 503)

    with pytest.raises(ForgeError) as down:
        await asyncio.wait_for(reviews.start_review(url, requested_by="U1"), WAIT)
    assert down.value.failure == "unavailable" and "try again" in down.value.fix

    outcome = await asyncio.wait_for(reviews.start_review(url, requested_by="U1"), WAIT)
    assert outcome.kind == "posted" and len(posted_reviews(forge, number)) == 1
