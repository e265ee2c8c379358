"""Dispatch records for tests and benchmarks, made from a few literals."""

from __future__ import annotations

import dataclasses
from typing import Any

from harness.tasks.model import DispatchRecord


def make_record(agent_id: str, **changes: Any) -> DispatchRecord:
    """A running developer dispatch; ``changes`` override any field."""
    base = DispatchRecord(
        agent_id=agent_id,
        role="developer",
        cwd="/work",
        model=None,
        started_at="2026-01-01T10:00:00Z",
        status="running",
        journal_file=f"journals/{agent_id}.jsonl",
    )
    return dataclasses.replace(base, **changes)
