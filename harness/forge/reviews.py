"""Reviews of pull requests, the pure part: a pull request's address, the lines of its diff a
review may comment on, a reviewer's findings read from its result, and the one review made of
them (pure functions, no I/O).

A reviewer is an agent, so everything it says is hostile: a finding becomes a comment on a
line only when its path is, character for character, a file of the pull request's diff and
its line one the diff shows on the new side; anything else is folded into the review's body
as text. Nothing a finding names is ever opened, fetched or followed: it is only compared
with what GitHub said the diff holds. Every text is cut to GitHub's limits, and mentions and
HTML comments are defused so a finding can neither notify people nor forge the review's
marker.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from harness.errors import HarnessError

Verdict = Literal["approve", "approve with suggestions", "changes required", "comments"]

# GitHub refuses a review body or comment over 65,536 characters; a review this long is
# noise anyway, so comments and the body stay well under it.
MAX_COMMENTS = 50
MAX_COMMENT_CHARS = 4_000
MAX_SUMMARY_CHARS = 8_000
MAX_NOTES = 30
MAX_NOTE_CHARS = 1_000
MAX_PATH_CHARS = 300
# The diff given to the reviewer in its prompt; the worktree holds the rest.
MAX_PROMPT_DIFF_CHARS = 60_000
MARKER = "harness-review"

_PULL_PATH = re.compile(r"^/(?P<owner>[A-Za-z0-9][A-Za-z0-9-]{0,38})/"
                        r"(?P<repo>[A-Za-z0-9._-]{1,100})/pulls?/(?P<number>[0-9]{1,9})/?"
                        r"(?:files|commits|changes)?/?$")  # fmt: skip
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(?P<start>\d+)(?:,\d+)? @@")
# A finding: `PATH:LINE: text` (a list marker and backticks around the path allowed).
_FINDING = re.compile(
    r"^\s*(?:[-*]\s+)?`?(?P<path>[^\s`:][^`:\n]*?)`?:(?P<line>[0-9]{1,9})(?:-[0-9]{1,9})?"
    r"`?\s*[:\-]?\s*(?P<body>.+)$",
    re.DOTALL,
)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_MENTION = re.compile(r"@(?=[A-Za-z0-9])")


class ReviewError(HarnessError):
    """A review cannot be asked for or made: the address, the repository, the reviewer."""


@dataclass(frozen=True)
class PullRef:
    """A pull request named by its address: ``owner/repo#number``."""

    owner: str
    repo: str
    number: int

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.repo}"

    def __str__(self) -> str:
        return f"{self.full_name}#{self.number}"


@dataclass(frozen=True)
class PullDetail:
    """What GitHub says of a pull request: its head (commit, branch, repository) and base."""

    number: int
    url: str
    title: str
    body: str
    state: str
    head_sha: str
    head_ref: str
    head_repo: str  # owner/name of the head's repository (another one for a fork)
    base_ref: str
    base_sha: str
    author: str


@dataclass(frozen=True)
class PullFile:
    """A file of a pull request's diff: its name on the new side and its patch (none for a
    binary file or one too large for GitHub to show)."""

    path: str
    status: str
    patch: str | None


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    body: str


@dataclass(frozen=True)
class Findings:
    """What a reviewer found: its summary and verdict, comments on lines, and general notes."""

    summary: str
    verdict: Verdict
    comments: tuple[Finding, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class LineComment:
    """A comment GitHub takes on a line of the diff's new side."""

    path: str
    line: int
    body: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "side": "RIGHT", "body": self.body}


@dataclass(frozen=True)
class ReviewDraft:
    """The one review to post: its body and its comments on lines; ``folded``: how many
    findings were not on a line of the diff and went into the body instead."""

    body: str
    comments: tuple[LineComment, ...]
    folded: int
    verdict: Verdict


def parse_pull_url(url: str, known: Mapping[str, str]) -> tuple[PullRef, str]:
    """The pull request ``url`` names, and the configured repository it is in: ``known``
    maps each configured GitHub repository's web address (``https://github.com/acme/web``,
    lower case) to the repository's name in config.yaml. ReviewError saying why else."""
    text = url.strip().strip("<>").split("|", 1)[0]
    parts = urlsplit(text)
    match = _PULL_PATH.match(parts.path) if parts.scheme in ("http", "https") else None
    if match is None or not parts.netloc:
        raise ReviewError(
            f"`{_shown(text, 120)}` is not the address of a pull request",
            fix="give the pull request's address, like https://github.com/OWNER/REPO/pull/12",
        )
    pull = PullRef(match["owner"], match["repo"], int(match["number"]))
    where = f"{parts.scheme}://{parts.netloc}/{pull.full_name}".lower()
    name = known.get(where)
    if name is None:
        listed = ", ".join(sorted(known)) or "none has `github:` set"
        raise ReviewError(
            f"{pull.full_name} is not a repository configured here (configured: {listed})",
            fix="add it under `workspaces.repositories` with `github: {repository: "
            f"{pull.full_name}}}` in config.yaml, or ask about a pull request of one of those",
        )
    return pull, name


def commentable_lines(files: Iterable[PullFile]) -> dict[str, frozenset[int]]:
    """Per file of the diff, the lines of its new side the diff shows (added or context):
    the lines a review comment with ``side: RIGHT`` may be on."""
    found: dict[str, frozenset[int]] = {}
    for file in files:
        lines: set[int] = set()
        number = 0
        for text in (file.patch or "").split("\n"):
            hunk = _HUNK.match(text)
            if hunk is not None:
                number = int(hunk["start"])
            elif number and text.startswith(("+", " ")):
                lines.add(number)
                number += 1
            elif number and text == "":  # a context line whose space was trimmed
                number += 1
        found[file.path] = frozenset(lines)
    return found


def read_findings(summary: str, issues: Sequence[str]) -> Findings:
    """A reviewer's findings from its structured result: each issue written as
    ``PATH:LINE: text`` is a comment on that line, any other is a general note; the verdict
    is how the summary begins."""
    comments, notes = [], []
    for issue in issues:
        match = _FINDING.match(issue)
        if match is not None and int(match["line"]) > 0:
            comments.append(Finding(match["path"].strip(), int(match["line"]), match["body"]))
        elif issue.strip():
            notes.append(issue.strip())
    return Findings(summary.strip(), _verdict(summary), tuple(comments), tuple(notes))


def _verdict(summary: str) -> Verdict:
    start = re.sub(r"[^a-z ]", " ", summary[:80].lower()).split()
    said = " ".join(start[:4])
    if "changes required" in said or "request changes" in said or said.startswith("reject"):
        return "changes required"
    if said.startswith("approve with") or "suggestions" in said:
        return "approve with suggestions"
    if said.startswith(("approve", "lgtm")):
        return "approve"
    return "comments"


def draft_review(
    findings: Findings,
    lines: Mapping[str, frozenset[int]],
    *,
    head_sha: str,
    for_person: str | None = None,
) -> ReviewDraft:
    """The review of ``findings``: those on a line ``lines`` holds become comments (at most
    ``MAX_COMMENTS``), the others go into the body with the summary and the notes.
    ``for_person``: who asked, when the bot posts for them."""
    comments: list[LineComment] = []
    outside: list[str] = []
    for finding in findings.comments:
        body = clean(finding.body, MAX_COMMENT_CHARS)
        if finding.line in lines.get(finding.path, ()) and len(comments) < MAX_COMMENTS:
            comments.append(LineComment(finding.path, finding.line, body))
        else:
            where = f"`{_shown(finding.path, MAX_PATH_CHARS)}` line {finding.line}"
            outside.append(f"{where}: {clean(finding.body, MAX_NOTE_CHARS)}")
    notes = [clean(note, MAX_NOTE_CHARS) for note in findings.notes] + outside
    parts = [f"**Verdict: {findings.verdict}**", clean(findings.summary, MAX_SUMMARY_CHARS)]
    if notes:
        shown = notes[:MAX_NOTES]
        more = len(notes) - len(shown)
        listed = "\n".join(f"- {note}" for note in shown)
        parts.append("Also found:\n" + listed + (f"\n- ({more} more left out)" if more else ""))
    by = f" for {for_person}" if for_person else ""
    parts.append(f"_Reviewed by the harness's reviewer{by}._\n\n<!-- {MARKER} {head_sha} -->")
    return ReviewDraft("\n\n".join(parts), tuple(comments), len(outside), findings.verdict)


def marks(body: str, head_sha: str) -> bool:
    """Whether a review's body is the harness's review of ``head_sha``."""
    return f"<!-- {MARKER} {head_sha} -->" in body


def clean(text: str, limit: int) -> str:
    """An agent's text as it may go on GitHub: no control characters, no mention that would
    notify someone, no HTML comment, at most ``limit`` characters."""
    text = _CONTROL.sub("", text).replace("<!--", "&lt;!--")
    text = _MENTION.sub("@\u200b", text).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _shown(text: str, limit: int) -> str:
    text = _CONTROL.sub("", text).replace("`", "'")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def review_prompt(pull: PullRef, detail: PullDetail, files: Sequence[PullFile], diff: str) -> str:
    """What the reviewer is asked: the pull request, its files and its diff (cut to fit: the
    worktree holds all of it, at the pull request's head)."""
    cut = diff if len(diff) <= MAX_PROMPT_DIFF_CHARS else diff[:MAX_PROMPT_DIFF_CHARS]
    note = "" if cut is diff else "\n(The diff was cut here; read the rest in the worktree.)"
    listed = "\n".join(f"- {f.path} ({f.status})" for f in files[:300])
    return (
        f"Review pull request {pull} ({detail.url}): {_shown(detail.title, 200)}\n\n"
        f"Your working folder is the pull request's head, commit {detail.head_sha}, and "
        f"the pull request changes it from {detail.base_ref} as the diff below shows.\n\n"
        f"Files changed:\n{listed}\n\n```diff\n{cut}\n```{note}\n\n"
        "Report each finding on a line of the diff as one item of `issues`, written "
        "`PATH:LINE: what is wrong and what to do`, with PATH as the diff names the file and "
        "LINE a line number of the file's new version that the diff shows. Findings about "
        "the whole change go in `issues` without a path. Begin `summary` with your verdict: "
        "approve, approve with suggestions, or changes required."
    )


def summary_line(pull: PullRef, draft: ReviewDraft, url: str, *, as_login: str) -> str:
    """The thread's one line about a posted review."""
    on_lines = f"{len(draft.comments)} comment(s) on lines"
    folded = f", {draft.folded} in the summary" if draft.folded else ""
    return f"Reviewed {pull} as {as_login}: {draft.verdict}, {on_lines}{folded}: {url}"
