"""``harness run`` with a model picked and a plan first: ``--model`` / ``model:NAME`` reach the
model API, a model the role does not allow stops before a task is made, and ``--plan-first`` /
``plan first:`` runs the agent read-only. A subprocess against the scripted model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn
from tests.harness.cli.cli_support import harness

pytestmark = pytest.mark.subprocess


def script(request: ModelRequest) -> Turn:
    return Turn.finish(
        "planned" if "make your result the plan" in request.first_user_text else "did"
    )


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel.in_thread(script) as served:
        yield served


def test_a_model_picked_with_the_flag_or_in_the_prompt_reaches_the_model(
    project_dir: Path, model: ScriptedModel
) -> None:
    flag = harness(project_dir, model, "run", "--model", "opus", "fix the login form")
    assert flag.returncode == 0, flag.stderr
    said = harness(project_dir, model, "run", "model:haiku fix the signup form")
    assert said.returncode == 0, said.stderr
    assert [r.model for r in model.main_requests] == ["claude-opus-5-5", "claude-haiku-5-5"]
    assert "model:haiku" not in model.main_requests[-1].first_user_text


def test_a_model_the_role_does_not_allow_stops_before_a_task_is_made(
    project_dir: Path, model: ScriptedModel
) -> None:
    refused = harness(project_dir, model, "run", "--model", "fable", "fix the login form")
    assert refused.returncode != 0
    assert "does not allow the model `fable`; it allows `sonnet`, `opus`, `haiku`" in refused.stderr
    assert model.main_requests == []
    assert not [p for p in (project_dir / ".agents" / "tasks").glob("*") if p.name[0] != "."]


@pytest.mark.parametrize(
    "args", [["--plan-first", "a settings page"], ["plan first: a settings page"]]
)
def test_a_plan_first_run_only_reads_and_says_how_to_implement_it(
    project_dir: Path, model: ScriptedModel, args: list[str]
) -> None:
    run = harness(project_dir, model, "run", *args)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("developer completed")  # not the analyst's `^plan` rule
    [asked] = model.main_requests
    assert not {"Write", "Edit", "Bash"} & set(asked.tool_names)
    assert "To implement this plan: harness run --task " in run.stdout
