"""The forge's credentials never reach an agent: the bot's GitHub token (in each repository's
``tokenEnv``) is not on the allow-list of an agent's environment, and a GitHub App's private
key is hidden even under a folder the sandbox shows read-only. A developer in the OS sandbox (the
default), on a task whose pull request the harness opened with that token, looks everywhere
a prompt-injected agent would. Real parts: the Claude Code CLI in bubblewrap against the
scripted model, a bare repository as the remote, a loopback GitHub."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.agents.runs import harness_files
from harness.project import Project, load_project
from harness.tasks.model import ThreadRef
from harness.testing.scripted_model import ModelRequest, Turn
from tests.forge_support import BOT_TOKEN, FULL_NAME, Forge, commit_on_branch, forge
from tests.harness.conftest import HarnessFactory
from tests.support import AnsweringHumans, make_repository

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
__all__ = ["forge"]  # the fixture, used by name

WAIT = 90.0
# An App's key configured under /etc, as operators keep them (/etc/harness/github-app.pem).
# Tests do not write to /etc: a file that is there on every Linux machine stands in for it.
KEY_FILE = next(
    (path for path in ("/etc/hostname", "/etc/os-release") if os.path.isfile(path)), None
)


@pytest.fixture
def project(project_dir: Path, forge: Forge, tmp_path: Path) -> Project:
    """``web`` with the fake GitHub (the bot's token in GITHUB_TOKEN) and ``api``, whose
    pull requests would be opened as a GitHub App with its key in KEY_FILE."""
    api = make_repository(tmp_path / "api")
    app = f"{{repository: acme/api, app: {{id: 1, privateKeyFile: '{KEY_FILE}'}}}}"
    lines = forge.config(token_env="GITHUB_TOKEN").replace(
        "\ngithub:\n", f"\n    api:\n      path: {api}\n      github: {app}\ngithub:\n", 1
    )
    config = project_dir / "config.yaml"
    config.write_text(config.read_text(encoding="utf-8") + lines, encoding="utf-8")
    return load_project(config)


class Commands:
    """The developer's script: one Bash call per command, in order, then the result."""

    def __init__(self, *commands: str) -> None:
        self.commands = commands

    def __call__(self, request: ModelRequest) -> Turn:
        done = len(request.all_tool_results)
        if done < len(self.commands):
            return Turn.call("Bash", command=self.commands[done], description="look")
        return Turn.finish("looked around")


async def test_every_app_key_is_kept_from_agents(project: Project) -> None:
    # Token variables need no list: agents get an allow-list of the environment.
    assert str(KEY_FILE) in harness_files(project.config)


@pytest.mark.skipif(KEY_FILE is None, reason="no file under /etc to stand in for the key")
async def test_a_sandboxed_developer_finds_no_token_and_no_app_key_anywhere(
    harness_with: HarnessFactory, forge: Forge, project: Project
) -> None:
    assert KEY_FILE is not None and Path(KEY_FILE).read_bytes().strip()  # not empty here
    script = Commands(
        "echo home=$HOME token=[$GITHUB_TOKEN]",
        "env",
        "cat /proc/self/environ | tr '\\0' '\\n'; cat /proc/*/environ | tr '\\0' '\\n'",
        f"cat {project.config.file}",
        "cat ~/.git-credentials ~/.config/gh/hosts.yml; git config --list --show-origin",
        f"cat {forge.remote}/config",
        f"cat {KEY_FILE}",
    )
    orchestrator, model = await harness_with(script)
    # Whatever is asked (reads outside the worktree) is allowed: the sandbox alone holds.
    orchestrator.humans.add_human_channel(
        AnsweringHumans(orchestrator.humans.answer_question, reply="allow")
    )
    task = await orchestrator.tasks.create_task(
        "Add a settings page", ThreadRef("C1", "1700000000.000100"), "web", requester="U42"
    )
    commit_on_branch(forge.repository, f"harness/{task.slug}", "settings.html", "<h1>Hi\n")
    pull = await orchestrator.pull_requests.open_pull_request(
        task.slug, by=None
    )  # with the bot's token
    assert forge.github.pulls(FULL_NAME)[0].number == pull.number

    handle = await orchestrator.draft(
        "developer", "look around", task_slug=task.slug, requested_by="U42"
    )
    record = await orchestrator.wait(handle.agent_id, WAIT)

    assert record.status == "completed", record.error
    results = [result.text for result in model.main_requests[-1].all_tool_results]
    assert len(results) == len(script.commands)
    assert "home=/home/agent token=[]" in results[0]  # in the sandbox, the variable empty
    assert "GITHUB_TOKEN" not in results[1]
    assert all(BOT_TOKEN not in text for text in results), results
    key = Path(KEY_FILE).read_text(encoding="utf-8").strip()
    # The key's file is shown empty, or cannot be opened: never its content.
    assert key not in [line.strip() for line in results[-1].splitlines()], results[-1]
