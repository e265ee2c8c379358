"""The pure part of reviews: a pull request's address, the diff's lines a comment may be on,
a reviewer's findings and the review made of them."""

from __future__ import annotations

import pytest

from harness.forge.reviews import (
    MAX_COMMENTS,
    Findings,
    PullFile,
    ReviewError,
    commentable_lines,
    draft_review,
    marks,
    parse_pull_url,
    read_findings,
)

KNOWN = {"https://github.com/acme/web": "web"}
PATCH = (
    "@@ -1,3 +1,4 @@\n keep\n-gone\n+new one\n+new two\n keep too\n@@ -10,2 +11,2 @@\n ten\n+eleven"
)


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/acme/web/pull/12",
        "<https://github.com/acme/web/pull/12>",
        "<https://github.com/acme/web/pull/12|acme/web#12>",
        "https://github.com/Acme/Web/pull/12/files",
    ],
)
def test_a_pull_requests_address_names_it_as_slack_and_github_write_it(url: str) -> None:
    pull, name = parse_pull_url(url, KNOWN)
    assert (pull.full_name.lower(), pull.number, name) == ("acme/web", 12, "web")


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("https://github.com/acme/web/issues/12", "not the address of a pull request"),
        ("file:///etc/passwd", "not the address of a pull request"),
        ("https://github.com/acme/web/pull/12/../../../x", "not the address of a pull request"),
        ("https://github.com/acme/other/pull/12", "not a repository configured here"),
        ("https://evil.example/acme/web/pull/12", "not a repository configured here"),
    ],
)
def test_anything_else_is_refused_saying_why(url: str, said: str) -> None:
    with pytest.raises(ReviewError) as refused:
        parse_pull_url(url, KNOWN)
    assert said in refused.value.message and refused.value.fix


def test_the_lines_a_comment_may_be_on_are_the_new_sides_added_and_context_lines() -> None:
    lines = commentable_lines(
        [PullFile("a.py", "modified", PATCH), PullFile("b.png", "added", None)]
    )
    assert lines == {"a.py": frozenset({1, 2, 3, 4, 11, 12}), "b.png": frozenset()}


def test_findings_on_lines_and_general_notes_are_told_apart_and_the_verdict_read() -> None:
    findings = read_findings(
        "Changes required: the loop never ends.",
        ["- `a.py:3`: loops forever", "a.py:11 - off by one", "No tests.", "a.py:0: zero"],
    )
    assert findings.verdict == "changes required"
    assert [(f.path, f.line, f.body) for f in findings.comments] == [
        ("a.py", 3, "loops forever"),
        ("a.py", 11, "off by one"),
    ]
    assert findings.notes == ("No tests.", "a.py:0: zero")


def test_a_review_has_at_most_its_share_of_line_comments_and_marks_its_head() -> None:
    many = tuple(read_findings("Approve.", [f"a.py:2: note {i}" for i in range(80)]).comments)
    draft = draft_review(
        Findings("Approve.", "approve", many, ()), {"a.py": frozenset({2})}, head_sha="abc"
    )
    assert len(draft.comments) == MAX_COMMENTS and draft.folded == 80 - MAX_COMMENTS
    assert marks(draft.body, "abc") and not marks(draft.body, "abd")
