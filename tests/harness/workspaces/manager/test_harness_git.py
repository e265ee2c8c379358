"""The harness's own git is not the agent's: no link, hook, fsmonitor or secret of the
worktree's reaches it."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from harness.git import git_env
from harness.workspaces.manager import Workspace, WorkspaceError, Workspaces
from tests.harness.workspaces.workspace_support import git, make_repo, settings_for

pytestmark = [pytest.mark.anyio, pytest.mark.git]


# --- the harness's own git is not the agent's ------------------------------------------------


async def prepared(project: Path, web: Path) -> tuple[Workspaces, Workspace]:
    workspaces = Workspaces(settings_for(project, web={"path": str(web)}))
    return workspaces, await workspaces.prepare("fix-it", "web")


async def test_a_deleted_git_link_never_sends_the_harness_to_the_enclosing_checkout(
    project: Path, web: Path, tmp_path: Path
) -> None:
    # The workspaces live inside a checkout that does not ignore them (the operator's app):
    # an agent that deletes its worktree's .git must not get the harness to commit its files
    # into that checkout.
    enclosing = make_repo(tmp_path / "app", {"README.md": "app\n"})
    settings = replace(settings_for(project, web={"path": str(web)}), root=enclosing / "ws")
    workspaces = Workspaces(settings)
    workspace = await workspaces.prepare("fix-it", "web")
    (workspace.path / ".git").unlink()
    (workspace.path / "evil.txt").write_text("planted\n", encoding="utf-8")
    before = git(enclosing, "rev-parse", "HEAD")

    with pytest.raises(WorkspaceError):
        await workspaces.report(workspace, commit="developer a1: done", author="harness dev")

    assert git(enclosing, "rev-parse", "HEAD") == before
    assert "evil.txt" not in git(enclosing, "ls-files")


async def test_hooks_and_fsmonitor_an_agent_configures_never_run_in_the_harness_s_git(
    project: Path, web: Path, tmp_path: Path
) -> None:
    workspaces, workspace = await prepared(project, web)
    marker = tmp_path / "ran"
    script = tmp_path / "payload.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\n", encoding="utf-8")
    script.chmod(0o755)
    # What an agent can write: the repository's config and hooks (its worktree's git dir
    # shares them), with a monitor and a hook that would run the payload.
    git(workspace.path, "config", "core.fsmonitor", str(script))
    hooks = Path(git(workspace.path, "rev-parse", "--git-common-dir"))
    if not hooks.is_absolute():
        hooks = workspace.path / hooks
    (hooks / "hooks" / "pre-commit").write_text(f"#!/bin/sh\ntouch {marker}\n", encoding="utf-8")
    (hooks / "hooks" / "pre-commit").chmod(0o755)
    (workspace.path / "src" / "app.py").write_text("print('changed')\n", encoding="utf-8")

    report = await workspaces.report(workspace, commit="developer a1: done", author="harness dev")

    assert not marker.exists()
    assert report is not None and "src/app.py" in report.diff_stat
    status = git(workspace.path, "-c", "core.fsmonitor=false", "status", "--porcelain")
    assert status == ""  # committed, with the hook not run


def test_the_harness_s_git_never_gets_its_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = (
        "SLACK_BOT_TOKEN",
        "ANTHROPIC_API_KEY",
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "HARNESS_SECRET_KEY",
        "OPENAI_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "DEPLOY_TOKEN",
        "GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_COUNT",
    )
    for name in secrets:
        monkeypatch.setenv(name, "secret")
    monkeypatch.setenv("PATH", os.environ["PATH"])

    env, minimal = git_env(), git_env(inherit=False)

    assert not set(secrets) & set(env)
    assert env["PATH"] == os.environ["PATH"]
    assert env["GIT_CONFIG_GLOBAL"] == os.environ["GIT_CONFIG_GLOBAL"]  # the operator's own
    assert set(minimal) <= {"PATH", "HOME", "LC_ALL", "LANGUAGE", "GIT_TERMINAL_PROMPT"} | {
        "GIT_OPTIONAL_LOCKS"
    }
