"""config.yaml read from disk: a missing file, a folder, YAML syntax errors and a file that is
not a mapping each named with the file, the line and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.settings import load_config
from harness.errors import ConfigError


def test_load_missing_file_names_the_file_and_how_to_point_to_one(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"

    with pytest.raises(ConfigError) as caught:
        load_config(missing)

    assert caught.value.file == str(missing)
    assert "not found" in caught.value.problem
    assert "HARNESS_CONFIG" in caught.value.fix


def test_load_a_folder_reads_the_config_yaml_in_it(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("defaultRole: coder\n", encoding="utf-8")

    config = load_config(tmp_path)

    assert config.file == tmp_path / "config.yaml"
    assert config.default_role == "coder"


def test_load_a_folder_without_config_yaml_names_the_file_in_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path)

    assert caught.value.file == str(tmp_path / "config.yaml")
    assert caught.value.problem == "file not found"
    assert f"harness init {tmp_path}" in caught.value.fix


def test_load_yaml_syntax_error_names_the_file_and_line(tmp_path: Path) -> None:
    file = tmp_path / "config.yaml"
    file.write_text("routing:\n  - pattern: [unclosed\n", encoding="utf-8")

    with pytest.raises(ConfigError) as caught:
        load_config(file)

    assert caught.value.file == str(file)
    assert caught.value.problem == (
        "YAML syntax error: expected ',' or ']', but got '<stream end>' "
        "(while parsing a flow sequence started at 2:14)"
    )
    # One line, file:line:column first, then the fix; never PyYAML's `<unicode string>`.
    assert str(caught.value).splitlines() == [
        f"{file}:3:1: {caught.value.problem}",
        "  fix: fix the YAML at the line and column shown (indent with spaces, quote regexes)",
    ]


def test_load_yaml_error_points_at_the_offending_column(tmp_path: Path) -> None:
    file = tmp_path / "config.yaml"
    file.write_text("defaultRole: developer\nslack: allowedUsers: []\n", encoding="utf-8")

    with pytest.raises(ConfigError) as caught:
        load_config(file)

    assert str(caught.value).startswith(
        f"{file}:2:20: YAML syntax error: mapping values are not allowed here\n"
    )


def test_load_file_that_is_not_a_mapping_is_rejected(tmp_path: Path) -> None:
    file = tmp_path / "config.yaml"
    file.write_text("- just\n- a list\n", encoding="utf-8")

    with pytest.raises(ConfigError) as caught:
        load_config(file)

    assert caught.value.field == "(top level)"
    assert "expected a mapping" in caught.value.problem


def test_load_empty_file_means_all_defaults(tmp_path: Path) -> None:
    file = tmp_path / "config.yaml"
    file.write_text("# nothing set\n", encoding="utf-8")

    assert load_config(file).default_role == "developer"


def test_a_missing_config_file_says_to_run_harness_init(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "config.yaml")

    assert caught.value.problem == "file not found"
    assert f"harness init {tmp_path}" in caught.value.fix
    assert "--config PATH" in caught.value.fix
