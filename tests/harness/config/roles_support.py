"""What the role files' tests share: a minimal role file, and the RoleError a text gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.roles import parse_role
from harness.errors import RoleError

MINIMAL = """\
---
name: developer
category: worker
---

You write code.
"""


def role_error(text: str, tmp_path: Path) -> RoleError:
    with pytest.raises(RoleError) as caught:
        parse_role(text, source="roles/x.md", base_dir=tmp_path)
    return caught.value
