"""Pushing a task's branch: from the repository itself, with the credential for that one push,
nothing an agent wrote in its worktree heard or run, none of the harness's secrets passed on.
Real git, a local bare repository as the remote."""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path

import pytest

from harness.config.settings import RepositorySettings
from harness.forge.push import credential_env, push_branch

pytestmark = pytest.mark.anyio

TOKEN = "ghp-the-push-token"


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=Dev", "-c", "user.email=dev@example.com", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout.strip()


def script(path: Path, body: str) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    path.chmod(0o755)
    return path


@pytest.fixture(autouse=True)
def harness_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The secrets of the harness's process, none of which a push needs."""
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    for name, value in {
        "GITHUB_TOKEN": "ghp-the-harness-token",
        "SLACK_BOT_TOKEN": "xoxb-the-bot",
        "ANTHROPIC_API_KEY": "sk-ant-the-model",
        "CLAUDE_CODE_OAUTH_TOKEN": "the-oauth-token",
        "HARNESS_SECRET_KEY": "the-harness-key",
        "DEPLOY_TOKEN": "the-deploy-token",
    }.items():
        monkeypatch.setenv(name, value)


async def test_a_push_runs_in_the_repository_hears_nothing_an_agent_wrote_and_gets_no_secret(
    tmp_path: Path,
) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    repo = tmp_path / "web"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("readme\n", encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "start")
    outside = tmp_path / "outside"
    outside.mkdir()
    # The operator's own transport, which records what git hands the programs it starts.
    seen = outside / "receive-pack-env"
    receive = script(tmp_path / "receive.sh", f'env > {seen}\nexec git-receive-pack "$@"')
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "config", "remote.origin.receivepack", str(receive))
    git(repo, "config", "extensions.worktreeConfig", "true")
    # The task's worktree and what its agent wrote there: its worktree config (read by any
    # git run in the worktree), a hook and a credential helper.
    worktree = tmp_path / "workspaces" / "t-1"
    git(repo, "worktree", "add", "-q", "-b", "harness/t-1", str(worktree))
    (worktree / "work.txt").write_text("work\n", encoding="utf-8")
    git(worktree, "add", "work.txt")
    git(worktree, "commit", "-q", "-m", "work")
    hooks = tmp_path / "agent-hooks"
    hooks.mkdir()
    script(hooks / "pre-push", f"env > {outside / 'agent-hook'}")
    script(repo / ".git" / "hooks" / "pre-push", f"env > {outside / 'repository-hook'}")
    helper = script(tmp_path / "helper.sh", f"env > {outside / 'helper'}")
    admin = Path(git(worktree, "rev-parse", "--absolute-git-dir"))
    (admin / "config.worktree").write_text(
        f"[core]\n\thooksPath = {hooks}\n[credential]\n\thelper = {helper}\n"
        f'[remote "origin"]\n\treceivepack = {helper}\n\turl = {outside / "elsewhere.git"}\n',
        encoding="utf-8",
    )
    pushed = git(repo, "rev-parse", "harness/t-1")

    commit = await push_branch(RepositorySettings("web", path=repo), "harness/t-1", token=TOKEN)

    assert commit == pushed == git(remote, "rev-parse", "harness/t-1")
    assert sorted(path.name for path in outside.iterdir()) == ["receive-pack-env"]
    env = seen.read_text(encoding="utf-8")
    for secret in ("ghp-the-harness-token", "xoxb", "sk-ant", "oauth", "harness-key", "deploy"):
        assert secret not in env


def test_the_credential_goes_in_the_environment_of_that_one_git_and_nothing_answers_for_it() -> (
    None
):
    env = credential_env(TOKEN)

    pairs = {
        env[f"GIT_CONFIG_KEY_{n}"]: env[f"GIT_CONFIG_VALUE_{n}"]
        for n in range(int(env["GIT_CONFIG_COUNT"]))
    }
    basic = base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
    assert pairs == {
        "http.extraHeader": f"AUTHORIZATION: basic {basic}",
        "credential.helper": "",
    }
    assert env["GIT_ASKPASS"] == env["SSH_ASKPASS"] == ""
    assert credential_env(None) == {}
    assert TOKEN not in os.environ.values()
