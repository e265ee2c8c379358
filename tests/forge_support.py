"""A team's repository with a GitHub of its own on loopback: a bare repository as the remote
(real `git push`), the repository tasks get worktrees of (its `origin` is that remote), and
the fake GitHub REST API that knows both."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.project import Project, load_project
from harness.testing.fake_github import FakeGitHub, PullRequest
from tests.support import git, make_repository

BOT_TOKEN = "ghp_bot_token_0123456789"
FULL_NAME = "acme/web"


@dataclass
class Forge:
    github: FakeGitHub
    remote: Path  # the bare repository GitHub holds
    repository: Path  # the team's checkout tasks get worktrees of

    def config(self, *, auto_fix_tries: int = 0, token_env: str = "GITHUB_TOKEN") -> str:
        """config.yaml's lines for the repository and its GitHub (appended to a config)."""
        return (
            "\nworkspaces:\n  default: web\n  repositories:\n    web:\n"
            f"      path: {self.repository}\n"
            f"      github: {{repository: {FULL_NAME}, apiUrl: '{self.github.api_url}', "
            f"tokenEnv: {token_env}}}\n"
            f"github:\n  apiUrl: '{self.github.api_url}'\n  webUrl: '{self.github.web_url}'\n"
            f"  checkPollSeconds: 0.05\n  autoFixTries: {auto_fix_tries}\n"
            "  clientId: Iv1.harness-tests\n"
        )

    def remote_branch(self, branch: str) -> str | None:
        """The commit ``branch`` is at on the remote, None when it is not there."""
        found = git(self.remote, "for-each-ref", "--format=%(objectname)", f"refs/heads/{branch}")
        return found or None


def with_forge(project_dir: Path, forge: Forge) -> Project:
    """The shipped project in ``project_dir`` with the repository ``web`` and its GitHub."""
    config = project_dir / "config.yaml"
    config.write_text(config.read_text(encoding="utf-8") + forge.config(), encoding="utf-8")
    return load_project(config)


@pytest.fixture
async def forge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Forge]:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    repository = make_repository(tmp_path / "web")
    git(repository, "remote", "add", "origin", str(remote))
    git(repository, "push", "-q", "origin", "main")
    monkeypatch.setenv("GITHUB_TOKEN", BOT_TOKEN)
    async with FakeGitHub(device_interval=0) as github:
        github.add_token(BOT_TOKEN, "harness-bot")
        github.add_repository(FULL_NAME, bare=remote, collaborators={"harness-bot", "alice"})
        yield Forge(github, remote, repository)


def commit_on_branch(repository: Path, branch: str, name: str, text: str) -> str:
    """A commit on ``branch`` (made from main if new), as an agent's work would be; its id.
    The worktree it is made in goes afterwards, so the harness can check the branch out."""
    exists = git(repository, "branch", "--list", branch)
    worktree = repository.parent / f"wt-{branch.replace('/', '-')}"
    git(
        repository,
        "worktree",
        "add",
        "-q",
        str(worktree),
        *([branch] if exists else ["-b", branch, "main"]),
    )
    (worktree / name).write_text(text, encoding="utf-8")
    git(worktree, "add", "-A")
    git(worktree, "commit", "-q", "-m", f"add {name}")
    head = git(worktree, "rev-parse", "HEAD")
    git(repository, "worktree", "remove", "--force", str(worktree))
    return head


def open_pull(forge: Forge, branch: str, name: str, text: str, *, by: str = "alice") -> int:
    """A pull request of ``branch`` (a commit adding ``name`` with ``text``, pushed to the
    remote) into main, opened by ``by`` on the fake GitHub; its number. Pushing again to the
    branch (``push_to_pull``) moves its head, as on GitHub."""
    head = push_to_pull(forge, branch, name, text)
    base = git(forge.remote, "rev-parse", "refs/heads/main")
    repo = forge.github.repository(FULL_NAME)
    pull = PullRequest(
        id=forge.github.next_id(), number=repo.next_number, repo=FULL_NAME,
        title=f"Add {name}", body="Please review.", head=branch, base="main",
        head_sha=head, base_sha=base, draft=False, user=by, user_type="User",
    )  # fmt: skip
    repo.next_number += 1
    forge.github.pull_requests[FULL_NAME.lower()].append(pull)
    return pull.number


def push_to_pull(forge: Forge, branch: str, name: str, text: str) -> str:
    """A commit on ``branch`` writing ``name``, pushed to the remote from a contributor's
    clone (the team's checkout never sees it); its id."""
    clone = forge.remote.parent / "contributor"
    if not clone.exists():
        git(forge.remote.parent, "clone", "-q", str(forge.remote), str(clone))
        git(clone, "config", "user.email", "alice@example.com")
        git(clone, "config", "user.name", "Alice")
    git(clone, "fetch", "-q", "origin")
    exists = git(clone, "ls-remote", "--heads", "origin", branch)
    git(clone, "checkout", "-q", "-B", branch, f"origin/{branch}" if exists else "origin/main")
    (clone / name).write_text(text, encoding="utf-8")
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", f"change {name}")
    git(clone, "push", "-q", "origin", f"{branch}:{branch}")
    return git(clone, "rev-parse", "HEAD")


def posted_reviews(forge: Forge, number: int) -> list[dict[str, Any]]:
    """The reviews posted on pull request ``number`` of the fake GitHub, oldest first."""
    return [dict(review) for review in forge.github.reviews.get((FULL_NAME.lower(), number), [])]
