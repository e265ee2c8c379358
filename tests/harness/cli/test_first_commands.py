"""A newcomer's first commands: bare ``harness``, ``--version``, ``init``, a config found or
named, and ``run`` without a model or on the scripted one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.harness.cli import cli_support
from tests.harness.cli.cli_support import bare, offline_env, task_folders

model = cli_support.model

pytestmark = pytest.mark.subprocess


def test_bare_harness_prints_the_help_and_exits_0(tmp_path: Path) -> None:
    result = bare(tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: harness")
    for command in ("init", "run", "tasks", "rm", "prune-tasks"):
        assert f"    {command} " in result.stdout


def test_version_names_the_version_and_the_distribution(tmp_path: Path) -> None:
    result = bare(tmp_path, "--version")

    assert result.returncode == 0
    assert re.fullmatch(r"harness \d+\.\d+\.\d+\S* \(harness-slack-agents\)\n", result.stdout)


def test_without_a_config_every_command_says_to_run_harness_init(tmp_path: Path) -> None:
    result = bare(tmp_path, "tasks")

    assert result.returncode == 2
    assert "config.yaml: (file): file not found" in result.stderr
    assert "run `harness init`" in result.stderr


def test_init_writes_a_project_that_the_next_commands_find_and_refuses_to_redo_it(
    tmp_path: Path,
) -> None:
    made = bare(tmp_path, "init", "team")
    assert made.returncode == 0, made.stderr
    assert "  cd team" in made.stdout
    assert (tmp_path / "team" / "roles" / "product-analyst.md").is_file()

    listing = bare(tmp_path / "team", "tasks")
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout.startswith("No tasks yet.")
    found = bare(
        tmp_path, "tasks", env={**offline_env(tmp_path), "HARNESS_CONFIG": "team/config.yaml"}
    )
    assert found.returncode == 0, found.stderr

    again = bare(tmp_path, "init", "team")
    assert again.returncode == 2
    assert "config.yaml, roles/developer.md" in again.stderr
    assert "--force" in again.stderr


def test_config_may_name_the_folder_holding_config_yaml(tmp_path: Path) -> None:
    assert bare(tmp_path, "init", "team").returncode == 0

    by_option = bare(tmp_path, "tasks", "--config", "team")
    by_env = bare(tmp_path, "tasks", env={**offline_env(tmp_path), "HARNESS_CONFIG": "team"})
    no_config = bare(tmp_path, "tasks", "--config", ".")

    assert by_option.returncode == 0, by_option.stderr
    assert by_option.stdout.startswith("No tasks yet.")
    assert by_env.returncode == 0, by_env.stderr
    assert no_config.returncode == 2
    assert "Errno" not in no_config.stderr
    assert no_config.stderr.startswith("harness: config.yaml: (file): file not found")


def test_run_without_a_way_to_reach_a_model_stops_before_creating_a_task(
    project_dir: Path,
) -> None:
    result = bare(project_dir, "run", "plan: a settings page")

    assert result.returncode == 2
    assert "ANTHROPIC_API_KEY" in result.stderr
    assert "--scripted" in result.stderr
    assert task_folders(project_dir) == []


def test_run_help_documents_the_scripted_model(tmp_path: Path) -> None:
    result = bare(tmp_path, "run", "--help")

    assert "--scripted" in result.stdout
    assert "offline" in result.stdout


@pytest.mark.slow
def test_run_scripted_needs_no_key_and_tasks_lists_its_status_and_cost(project_dir: Path) -> None:
    run = bare(project_dir, "run", "--scripted", "plan: a settings page")

    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("product-analyst completed")
    assert "scripted" in run.stderr
    assert "(simulated)" in run.stdout.splitlines()[0]
    listing = bare(project_dir, "tasks")
    row = listing.stdout.splitlines()[1].split()
    assert (row[0], row[3], row[5], row[6]) == (
        "plan-a-settings-page",
        "completed",
        "(simulated)",  # kept with the task: nothing was paid for it
        "2",
    )
    assert re.fullmatch(r"\$\d+\.\d{4}", row[4])
    shown = bare(project_dir, "show", "plan-a-settings-page")
    assert "(simulated)" in shown.stdout
