"""The file task store in a temp folder, closed after the test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness.tasks.store import FileTaskStore


@pytest.fixture
async def files(tmp_path: Path) -> AsyncIterator[FileTaskStore]:
    store = FileTaskStore(tmp_path)
    yield store
    await store.close()
