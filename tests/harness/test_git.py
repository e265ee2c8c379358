"""The harness's own git, from async code (``git``) and inside a whole blocking operation
(``git_now``), meeting a lock another git process holds (``index.lock``): tried again
briefly, so a lock released meanwhile costs nothing; a lock that stays, or any other failure,
is git's error. Real git; the lock is a real ``index.lock`` file."""

from __future__ import annotations

from pathlib import Path

import pytest

import harness.git as harness_git
from harness.errors import GitError, WorkspaceError
from harness.git import GitResult, git, git_now
from harness.retry import Backoff
from tests.support import git as run_git
from tests.support import make_repository

pytestmark = pytest.mark.anyio


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = make_repository(tmp_path / "web")
    (repo / "new.txt").write_text("new\n", encoding="utf-8")
    (repo / ".git" / "index.lock").write_text("", encoding="utf-8")  # another git's lock
    return repo


def count_runs(
    monkeypatch: pytest.MonkeyPatch, *, blocking: bool = False, release_after: int | None = None
) -> list[str]:
    """The stderr of each git process the harness starts (``git_now``'s with ``blocking``);
    the lock goes once ``release_after`` of them ran (the other git finishing)."""
    seen: list[str] = []
    real_run, real_run_now = harness_git._run, harness_git._run_now

    def noted(result: GitResult, cwd: Path) -> GitResult:
        seen.append(result.stderr)
        if release_after is not None and len(seen) == release_after:
            (cwd / ".git" / "index.lock").unlink()
        return result

    async def run(
        args: tuple[str, ...], cwd: Path, env: dict[str, str], timeout: float
    ) -> GitResult:
        return noted(await real_run(args, cwd, env, timeout), cwd)

    def run_now(args: tuple[str, ...], cwd: Path, env: dict[str, str], timeout: float) -> GitResult:
        return noted(real_run_now(args, cwd, env, timeout), cwd)

    if blocking:
        monkeypatch.setattr(harness_git, "_run_now", run_now)
    else:
        monkeypatch.setattr(harness_git, "_run", run)
    return seen


async def test_a_lock_released_meanwhile_is_waited_out(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = count_runs(monkeypatch, release_after=2)

    result = await git("add", "new.txt", cwd=repo)

    assert result.ok
    assert run_git(repo, "status", "--porcelain") == "A  new.txt"
    assert len(runs) == 3 and all("index.lock" in stderr for stderr in runs[:2])


async def test_a_lock_that_stays_is_gits_error_after_a_few_tries(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(harness_git, "_LOCK_BACKOFF", Backoff(first=0.001, cap=0.001))
    runs = count_runs(monkeypatch)

    with pytest.raises(GitError) as refused:
        await git("add", "new.txt", cwd=repo)
    unchecked = await git("add", "new.txt", cwd=repo, check=False)

    assert "index.lock': File exists" in refused.value.stderr
    assert not unchecked.ok and "index.lock" in unchecked.stderr
    assert len(runs) == 2 * (harness_git._LOCK_RETRIES + 1)


async def test_any_other_failure_is_not_tried_again(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (repo / ".git" / "index.lock").unlink()
    runs = count_runs(monkeypatch)

    with pytest.raises(GitError, match="did not match any files"):
        await git("add", "missing.txt", cwd=repo)

    assert len(runs) == 1


def test_a_blocking_call_waits_out_a_lock_released_meanwhile(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = count_runs(monkeypatch, blocking=True, release_after=2)

    result = git_now("add", "new.txt", cwd=repo)

    assert result.ok
    assert run_git(repo, "status", "--porcelain") == "A  new.txt"
    assert len(runs) == 3 and all("index.lock" in stderr for stderr in runs[:2])


def test_a_blocking_call_meeting_a_lock_that_stays_fails_with_gits_error(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(harness_git, "_LOCK_BACKOFF", Backoff(first=0.001, cap=0.001))
    runs = count_runs(monkeypatch, blocking=True)

    with pytest.raises(GitError) as refused:
        git_now("add", "new.txt", cwd=repo, fix="wait for the other git")

    assert "index.lock': File exists" in refused.value.stderr
    assert refused.value.fix == "wait for the other git"
    assert len(runs) == harness_git._LOCK_RETRIES + 1


def test_a_blocking_call_in_a_missing_folder_says_the_workspace_is_gone(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="does not exist") as failed:
        git_now("status", cwd=tmp_path / "gone")

    assert "prepare the task's workspace again" in failed.value.fix


def test_a_blocking_call_gets_none_of_the_harness_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repository(tmp_path / "web")
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-secret")
    monkeypatch.setenv("DEPLOY_TOKEN", "t0ken")
    shown = "!f() { env; }; f"  # an alias git runs through the shell: it prints what it got

    seen = git_now("-c", f"alias.shown={shown}", "shown", cwd=repo).text

    assert "LC_ALL=C" in seen
    assert "xoxb-secret" not in seen and "t0ken" not in seen
