"""Which repository a message is about (choose_repository): named, a channel's, the default,
or a choice the person must make."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from harness.config.settings import RepositorySettings, WorkspaceSettings
from harness.workspaces.manager import RepositoryChoice, choose_repository

pytestmark = [pytest.mark.anyio, pytest.mark.git]


# --- which repository a message is about ---------------------------------------------------

TWO = WorkspaceSettings(
    root=Path("/w"),
    default=None,
    channels={"C0123ABCD": "api"},
    repositories={
        "api": RepositorySettings("api", url="https://git.example.com/api.git"),
        "web": RepositorySettings("web", path=Path("/src/web")),
    },
)
WITH_DEFAULT = replace(TWO, default="web")
ONE = replace(TWO, channels={}, repositories={"web": TWO.repositories["web"]})
NONE = WorkspaceSettings(root=Path("/w"))


@pytest.mark.parametrize(
    ("settings", "text", "channel", "status", "repository", "source", "rest"),
    [
        (TWO, "repo:web fix the login", None, "chosen", "web", "message", "fix the login"),
        (TWO, "fix repo:web the login", None, "chosen", "web", "message", "fix the login"),
        (TWO, "fix it in repo:WEB.", "C0123ABCD", "chosen", "web", "message", "fix it in."),
        (TWO, "review\nrepo:api this", None, "chosen", "api", "message", "review\nthis"),
        (TWO, "fix the login", "C0123ABCD", "chosen", "api", "channel", "fix the login"),
        (WITH_DEFAULT, "fix the login", "C9", "chosen", "web", "default", "fix the login"),
        (ONE, "fix the login", None, "chosen", "web", "only", "fix the login"),
        (TWO, "fix the login", "C9", "ambiguous", None, None, "fix the login"),
        (TWO, "fix the login", None, "ambiguous", None, None, "fix the login"),
        (TWO, "repo:wbe fix it", None, "unknown", None, None, "fix it"),
        (NONE, "write a poem", "C0123ABCD", "none", None, None, "write a poem"),
        (NONE, "repo:web write", None, "unknown", None, None, "write"),
        (WITH_DEFAULT, "see x/repo:api, myrepo:api", None, "chosen", "web", "default",
         "see x/repo:api, myrepo:api"),
    ],
)  # fmt: skip
def test_choose_repository(
    settings: WorkspaceSettings,
    text: str,
    channel: str | None,
    status: str,
    repository: str | None,
    source: str | None,
    rest: str,
) -> None:
    choice = choose_repository(settings, text, channel)

    assert (choice.status, choice.repository, choice.source, choice.text) == (
        status,
        repository,
        source,
        rest,
    )


def test_an_ambiguous_choice_lists_the_candidates_and_an_unknown_one_the_known_names() -> None:
    assert choose_repository(TWO, "fix it", None) == RepositoryChoice(
        "ambiguous", "fix it", candidates=("api", "web")
    )
    assert choose_repository(TWO, "repo:api repo:web fix", None) == RepositoryChoice(
        "ambiguous", "fix", source="message", candidates=("api", "web")
    )
    assert choose_repository(TWO, "repo:Wbe fix", None) == RepositoryChoice(
        "unknown", "fix", candidates=("api", "web"), requested="wbe"
    )
    assert choose_repository(NONE, "repo:web fix", None) == RepositoryChoice(
        "unknown", "fix", requested="web"
    )


def test_a_choice_that_needs_the_person_explains_what_to_write() -> None:
    ambiguous = choose_repository(TWO, "fix the login", None)
    unknown = choose_repository(TWO, "repo:wbe fix", None)

    assert ambiguous.explain() == "Which repository is this about? Add one of: repo:api, repo:web."
    assert (
        unknown.explain() == "No repository 'wbe'. Did you mean 'web'? Known: repo:api, repo:web."
    )
    assert choose_repository(TWO, "repo:web fix", None).explain() is None
