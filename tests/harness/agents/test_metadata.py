import subprocess
from pathlib import Path

import pytest

from harness.agents.metadata import MetadataCollector, parse_output
from harness.config.settings import MetadataField


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
    collector = MetadataCollector([MetadataField("here", "pwd; echo x >> runs")])
    first = await collector.collect(tmp_path)
    second = await collector.collect(tmp_path)
    assert first["here"].value == str(tmp_path)
    assert second == first
    assert counter.read_text(encoding="utf-8").count("x") == 1


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
