"""What the benchmarks share: the bare-SDK baseline, a scratch copy of the project, a summary."""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, query

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from harness.cli.scaffold import init_project  # noqa: E402
from harness.tasks.model import RESULT_SCHEMA  # noqa: E402


async def bare_query(env: dict[str, str], prompt: str) -> float:
    """Seconds for one bare ``query()`` run ending in a structured result: the baseline."""
    options = ClaudeAgentOptions(
        output_format={"type": "json_schema", "schema": RESULT_SCHEMA}, env=env
    )
    started = time.perf_counter()
    async for message in query(prompt=prompt, options=options):
        if isinstance(message, ResultMessage):
            assert message.structured_output, message
    return time.perf_counter() - started


def copy_project(folder: Path) -> Path:
    """The shipped config.yaml and roles/ in ``folder`` (so tasks land there); the config."""
    init_project(folder)
    return folder / "config.yaml"


def summary(name: str, samples: list[float]) -> str:
    return (
        f"{name:<30} median {statistics.median(samples):.3f} s  "
        f"min {min(samples):.3f}  max {max(samples):.3f}  (n={len(samples)})"
    )
