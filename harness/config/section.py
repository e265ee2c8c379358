"""What every config.yaml section builds on: a strict model, and paths relative to the file.

Strict types: YAML's "3" is not an integer and `true` is not a number; unknown keys are
errors, so a typo never leaves a setting at its default unnoticed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pydantic


class Section(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", strict=True)


def resolve(base_dir: Path, value: str) -> Path:
    """``value`` (``~`` expanded) made absolute under ``base_dir``, the config file's folder."""
    # normpath, not resolve(): parsing stays free of file-system access.
    return Path(os.path.normpath(base_dir / Path(value).expanduser()))
