"""``harness init`` and the shipped defaults it writes."""

from __future__ import annotations

import shutil
from pathlib import Path, PurePosixPath

import pytest

from harness.cli.scaffold import DEFAULTS, config_for_demo, init_project, render_init
from harness.errors import HarnessError
from harness.project import load_project

SHIPPED = [
    PurePosixPath("config.yaml"),
    PurePosixPath("roles/developer.md"),
    PurePosixPath("roles/product-analyst.md"),
    PurePosixPath("roles/reviewer.md"),
]


def test_init_writes_the_shipped_config_and_roles_which_load(tmp_path: Path) -> None:
    folder = tmp_path / "new" / "project"

    report = init_project(folder)

    assert list(report.written) == SHIPPED
    assert report.replaced == ()
    for name in SHIPPED:
        assert (folder / name).read_bytes() == (DEFAULTS / name).read_bytes()
    project = load_project(folder / "config.yaml")
    assert project.config.tasks_dir == folder / ".agents" / "tasks"
    assert set(project.roles) == {"developer", "product-analyst", "reviewer"}


def test_init_refuses_to_overwrite_and_names_what_is_there(tmp_path: Path) -> None:
    (tmp_path / "roles").mkdir()
    (tmp_path / "roles" / "reviewer.md").write_text("mine", encoding="utf-8")
    (tmp_path / "roles" / "architect.md").write_text("mine too", encoding="utf-8")

    with pytest.raises(HarnessError) as caught:
        init_project(tmp_path)

    assert caught.value.message == f"{tmp_path} already has roles/reviewer.md: not overwriting them"
    assert "--force" in caught.value.fix
    assert not (tmp_path / "config.yaml").exists()  # nothing written at all
    assert (tmp_path / "roles" / "reviewer.md").read_text(encoding="utf-8") == "mine"


def test_init_completes_a_config_without_roles_and_keeps_the_config(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("defaultRole: reviewer\n", encoding="utf-8")

    report = init_project(tmp_path)

    assert list(report.written) == SHIPPED[1:]
    assert report.kept == (PurePosixPath("config.yaml"),)
    assert report.replaced == ()
    assert (tmp_path / "config.yaml").read_text(encoding="utf-8") == "defaultRole: reviewer\n"
    for name in SHIPPED[1:]:
        assert (tmp_path / name).read_bytes() == (DEFAULTS / name).read_bytes()
    assert load_project(tmp_path / "config.yaml").config.default_role == "reviewer"
    assert render_init(report, cwd=tmp_path).splitlines()[:2] == [
        f"Kept {tmp_path}/config.yaml (already there, unchanged).",
        f"Wrote the missing {tmp_path}/roles/ (developer.md, product-analyst.md, reviewer.md).",
    ]


def test_init_completes_an_empty_roles_folder_too(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("", encoding="utf-8")
    (tmp_path / "roles").mkdir()

    assert list(init_project(tmp_path).written) == SHIPPED[1:]


def test_init_with_a_config_and_roles_of_its_own_refuses(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("", encoding="utf-8")
    (tmp_path / "roles").mkdir()
    (tmp_path / "roles" / "architect.md").write_text("mine", encoding="utf-8")

    with pytest.raises(HarnessError, match=r"already has config\.yaml: not overwriting"):
        init_project(tmp_path)
    assert not (tmp_path / "roles" / "developer.md").exists()


def test_init_into_a_file_says_it_cannot_write_there(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("", encoding="utf-8")

    with pytest.raises(HarnessError, match=f"cannot write {tmp_path}/taken/config.yaml"):
        init_project(tmp_path / "taken")


def test_init_with_force_replaces_the_shipped_files_and_leaves_the_others(tmp_path: Path) -> None:
    init_project(tmp_path)
    (tmp_path / "config.yaml").write_text("defaultRole: reviewer\n", encoding="utf-8")
    (tmp_path / "roles" / "architect.md").write_text("mine", encoding="utf-8")

    report = init_project(tmp_path, force=True)

    assert list(report.replaced) == SHIPPED
    assert (tmp_path / "config.yaml").read_bytes() == (DEFAULTS / "config.yaml").read_bytes()
    assert (tmp_path / "roles" / "architect.md").read_text(encoding="utf-8") == "mine"


def test_what_init_says_next_starts_with_cd_only_for_another_folder(tmp_path: Path) -> None:
    report = init_project(tmp_path / "bot")

    elsewhere = render_init(report, cwd=tmp_path)
    here = render_init(report, cwd=tmp_path / "bot")

    assert elsewhere.splitlines()[0] == (
        f"Wrote {tmp_path}/bot/config.yaml and {tmp_path}/bot/roles/ "
        "(developer.md, product-analyst.md, reviewer.md)."
    )
    assert f"  cd {tmp_path / 'bot'}" in elsewhere.splitlines()
    assert "  cd " not in here
    assert 'harness run --scripted "plan: a settings page"' in here
    assert "ANTHROPIC_API_KEY" in here


def test_a_demo_takes_the_config_it_is_given_then_the_usual_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HARNESS_CONFIG", raising=False)
    given = tmp_path / "given.yaml"
    (tmp_path / "config.yaml").write_text("", encoding="utf-8")

    assert config_for_demo(given) == given
    assert config_for_demo(None) == Path("config.yaml")


def test_a_demo_without_a_config_runs_on_the_shipped_defaults_in_a_folder_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HARNESS_CONFIG", str(tmp_path / "missing.yaml"))

    config = config_for_demo(None)

    try:
        assert config.read_bytes() == (DEFAULTS / "config.yaml").read_bytes()
        assert not config.is_relative_to(tmp_path)
        # Kept after the demo: its transcript and tasks are where it says.
        assert f"using the shipped defaults in {config.parent}" in capsys.readouterr().err
        load_project(config)
    finally:
        shutil.rmtree(config.parent)
