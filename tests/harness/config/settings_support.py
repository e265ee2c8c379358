"""What the config.yaml tests share: the ConfigError a mapping gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.settings import parse_config
from harness.errors import ConfigError


def parse_error(mapping: dict[str, object], tmp_path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        parse_config(mapping, file=tmp_path / "config.yaml")
    return caught.value


def workspaces_error(section: dict[str, object], tmp_path: Path) -> ConfigError:
    return parse_error({"workspaces": section}, tmp_path)
