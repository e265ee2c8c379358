import json
import os
import subprocess
from pathlib import Path

import pytest

from harness.agents.metadata import MetadataCollector, parse_output
from harness.config.settings import MetadataField
from harness.testing.clock import FakeClock


def test_output_that_is_json_becomes_a_value() -> None:
    assert parse_output("810\n") == 810
    assert parse_output("feature-x\n") == "feature-x"
    assert parse_output("  ") is None


@pytest.mark.anyio
async def test_a_failing_command_fills_only_its_own_error(tmp_path: Path) -> None:
    collector = MetadataCollector(
        [
            MetadataField("branch", "echo main"),
            MetadataField("pr", "echo 'gh: not found' >&2; exit 3"),
        ]
    )
    values = await collector.collect(tmp_path)
    assert values["branch"].value == "main"
    assert values["branch"].error is None
    assert values["pr"].value is None
    assert values["pr"].error is not None
    assert "exit 3" in values["pr"].error
    assert "gh: not found" in values["pr"].error


@pytest.mark.anyio
async def test_a_slow_command_times_out_with_an_error(tmp_path: Path) -> None:
    collector = MetadataCollector(
        [MetadataField("slow", "sleep 30", timeout_seconds=0.2), MetadataField("ok", "echo 1")]
    )
    values = await collector.collect(tmp_path)
    assert values["slow"].error is not None
    assert "timed out after 0.2 s" in values["slow"].error
    assert values["ok"].value == 1


@pytest.mark.anyio
async def test_commands_run_in_the_agents_cwd_and_are_cached(tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    # Outside the sandbox, where the folder is writable, so the runs can be counted.
    collector = MetadataCollector([MetadataField("here", "pwd; echo x >> runs")], sandboxed=False)
    first = await collector.collect(tmp_path)
    second = await collector.collect(tmp_path)
    assert first["here"].value == str(tmp_path)
    assert second == first
    assert counter.read_text(encoding="utf-8").count("x") == 1


@pytest.mark.anyio
async def test_a_cached_value_is_collected_again_once_its_ttl_has_passed(tmp_path: Path) -> None:
    clock = FakeClock()
    collector = MetadataCollector(
        [MetadataField("runs", "echo x >> runs; wc -l < runs")],
        ttl_seconds=5.0,
        sandboxed=False,  # a writable folder, so the runs can be counted
        clock=clock,
    )
    assert (await collector.collect(tmp_path))["runs"].value == 1

    clock.advance(4.9)
    assert (await collector.collect(tmp_path))["runs"].value == 1  # still fresh: cached
    clock.advance(0.1)
    assert (await collector.collect(tmp_path))["runs"].value == 2
    assert (await collector.collect(tmp_path))["runs"].value == 2  # cached anew


@pytest.mark.anyio
async def test_a_command_in_an_agents_folder_gets_no_secret_and_its_git_runs_no_agent_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The agent's folder links to a git directory it wrote, whose config runs its program.
    folder = tmp_path / "t-1"
    folder.mkdir()
    planted = tmp_path / "planted"
    subprocess.run(["git", "init", "-q", str(planted)], check=True)
    marker = tmp_path / "ran"
    hook = planted / "evil.sh"
    hook.write_text(f"#!/bin/sh\nenv > {marker}\n", encoding="utf-8")
    hook.chmod(0o755)
    subprocess.run(["git", "-C", str(planted), "config", "core.fsmonitor", str(hook)], check=True)
    (folder / ".git").write_text(f"gitdir: {planted / '.git'}\n", encoding="utf-8")
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-secret")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    collector = MetadataCollector(
        [MetadataField("status", "git status --porcelain | wc -l"), MetadataField("env", "env")]
    )

    values = await collector.collect(folder)

    assert values["status"].error is None
    assert not marker.exists()
    assert "xoxb-secret" not in str(values["env"].value)
    assert "sk-ant-secret" not in str(values["env"].value)


OLD = 1_000_000_000


def _git(folder: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=A", "-c", "user.email=a@example.com", *args],
        cwd=folder,
        check=True,
        capture_output=True,
    )


@pytest.mark.anyio
async def test_a_command_sees_the_folder_read_only_and_nothing_of_the_harness(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "etc-harness-env"
    secret.write_text("SLACK_BOT_TOKEN=xoxb-on-disk\n", encoding="utf-8")
    folder = tmp_path / "t-1"
    folder.mkdir()
    (folder / "VERSION").symlink_to(secret)  # the agent's link to the harness's env file
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-secret")
    collector = MetadataCollector(
        [
            MetadataField("version", "cat VERSION"),
            MetadataField("env", "env"),
            MetadataField("write", "touch planted && echo wrote"),
            MetadataField("here", "pwd"),
        ]
    )

    values = await collector.collect(folder)

    assert "xoxb" not in json.dumps({k: [v.value, v.error] for k, v in values.items()})
    assert values["version"].error is not None
    assert sorted(line.split("=")[0] for line in str(values["env"].value).split()) == [
        "HOME",
        "LANG",
        "PATH",
        "PWD",
    ]
    assert values["write"].error is not None and not (folder / "planted").exists()
    assert values["here"].value == str(folder)


def _scratch_with_config(folder: Path, config: str, canary: Path) -> None:
    """A scratch folder whose own repository (the agent's) holds ``config``, with a file
    git must read again."""
    folder.mkdir()
    _git(folder, "init", "-q")
    (folder / ".gitattributes").write_text("* filter=x diff=x\n", encoding="utf-8")
    (folder / "notes.txt").write_text("notes\n", encoding="utf-8")
    _git(folder, "add", "-A")
    _git(folder, "commit", "-q", "-m", "v")
    with (folder / ".git" / "config").open("a", encoding="utf-8") as file:
        file.write(config.format(run=f"sh -c 'env > {canary}; cat'", canary=canary))
    (folder / "notes.txt").write_text("notes, changed\n", encoding="utf-8")
    os.utime(folder / ".gitattributes", (OLD, OLD))


SCRATCH_CONFIGS = {
    "clean filter": '[filter "x"]\n\tclean = "{run}"\n',
    "process filter": '[filter "x"]\n\tprocess = "{run}"\n',
    "textconv": '[diff "x"]\n\ttextconv = "{run}"\n',
    "fsmonitor": "[core]\n\tfsmonitor = {canary}.sh\n",
    "include": "[include]\n\tpath = {canary}.cfg\n",
    "includeIf": '[includeIf "gitdir:/"]\n\tpath = {canary}.cfg\n',
    "alias": '[alias]\n\tst = "!{run}"\n',
}


@pytest.mark.anyio
@pytest.mark.parametrize("config", sorted(SCRATCH_CONFIGS))
async def test_git_in_a_scratch_folder_runs_no_program_its_config_names_outside(
    config: str, tmp_path: Path
) -> None:
    canary = tmp_path / "canary"
    run = f"sh -c 'env > {canary}; cat'"
    (tmp_path / "canary.cfg").write_text(f'[filter "x"]\n\tclean = "{run}"\n', encoding="utf-8")
    (tmp_path / "canary.sh").write_text(f"#!/bin/sh\nenv > {canary}\n", encoding="utf-8")
    (tmp_path / "canary.sh").chmod(0o755)
    folder = tmp_path / "t-1"
    _scratch_with_config(folder, SCRATCH_CONFIGS[config], canary)
    collector = MetadataCollector(
        [
            MetadataField("status", "git status --porcelain"),
            MetadataField("diff", "git diff"),
            MetadataField("log", "git log -p -1"),
            MetadataField("alias", "git st"),
        ]
    )

    values = await collector.collect(folder)

    assert not canary.exists()
    if config != "process filter":  # a filter process that cannot start fails git
        assert values["status"].error is None  # git itself works there


@pytest.mark.anyio
async def test_git_status_in_a_worktree_sees_its_repository(tmp_path: Path) -> None:
    repo = tmp_path / "web"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("readme\n", encoding="utf-8")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "start")
    worktree = tmp_path / "workspaces" / "t-1"
    _git(repo, "worktree", "add", "-q", "-b", "harness/t-1", str(worktree))
    (worktree / "README.md").write_text("changed\n", encoding="utf-8")
    collector = MetadataCollector(
        [
            MetadataField("branch", "git rev-parse --abbrev-ref HEAD"),
            MetadataField("status", "git status --porcelain"),
        ]
    )

    values = await collector.collect(worktree)

    assert values["branch"].value == "harness/t-1", values["branch"].error
    assert values["status"].value == "M README.md"
