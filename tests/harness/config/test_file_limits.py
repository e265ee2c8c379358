"""`slack.files` in config.yaml: how large and how many files a request may attach."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.settings import FileLimits, parse_config
from harness.errors import ConfigError


def test_files_have_limits_by_default_and_as_configured(tmp_path: Path) -> None:
    file = tmp_path / "config.yaml"
    assert parse_config({}, file=file).slack.files == FileLimits(10 * 1024 * 1024, 10)
    raw = {"slack": {"files": {"maxBytes": 2048, "maxCount": 0}}}
    assert parse_config(raw, file=file).slack.files == FileLimits(2048, 0)


@pytest.mark.parametrize(
    ("files", "field", "says"),
    [
        ({"maxBytes": 0}, "slack.files.maxBytes", "must be >= 1"),
        ({"maxCount": "10"}, "slack.files.maxCount", "maxCount: 10"),
        ({"maxFiles": 3}, "slack.files.maxFiles", "maxBytes"),
    ],
)
def test_a_wrong_limit_names_its_field(
    tmp_path: Path, files: dict[str, object], field: str, says: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"slack": {"files": files}}, file=tmp_path / "config.yaml")
    shown = f"{caught.value.message}\n{caught.value.fix}"
    assert f"{field}:" in shown
    assert says in shown
