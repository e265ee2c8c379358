"""Wait lanes: pytest-xdist workers of their own for the tests that mostly wait.

A test marked ``waits`` spends most of its time waiting out a real window (an outage, a
heartbeat bound, a back-off) and little of it on the CPU. Mixed in with the rest, three of
them at once left both cores idle for much of the run's first two minutes. So under ``-n``
the ``WAIT_LANES`` workers that came up last take those tests, one after the other, longest
first, split so that the lanes end together; the other workers keep the CPU busy with the
rest. A lane that runs out joins the others. At least one worker is kept for the rest; with
one worker, or no test marked ``waits`` (the fast tier), it is pytest-xdist's own load
scheduling.

The controller does not collect tests: the first worker writes which tests wait, in the
order it will run them, to a file the controller named in the environment every worker
inherits, and the scheduler reads it once every worker has collected.
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScheduling  # type: ignore[import-untyped]

from harness.atomic import write_atomic

WAIT_LANES = 2
LANES_FILE = "HARNESS_TEST_WAIT_LANES"
# A waiting test not in tests/longest.txt is taken to hold its worker this long (seconds).
UNLISTED_SECONDS = 2.0


def name_lanes_file() -> Path:
    """Called by the controller before the workers start: where the first one writes (made
    by it, read and removed by the scheduler)."""
    path = Path(tempfile.gettempdir()) / f"harness-wait-lanes-{os.getpid()}-{secrets.token_hex(4)}"
    os.environ[LANES_FILE] = str(path)
    return path


def write_waiting(items: Sequence[pytest.Item]) -> None:
    """On the first worker, once its items are in running order: the tests that wait."""
    target = os.environ.get(LANES_FILE)
    if target is None or os.environ.get("PYTEST_XDIST_WORKER") != "gw0":
        return
    waiting = [item.nodeid for item in items if item.get_closest_marker("waits") is not None]
    write_atomic(Path(target), json.dumps(waiting).encode("utf-8"))


def split_lanes(waiting: Sequence[str], seconds: dict[str, float], lanes: int) -> list[list[str]]:
    """The waiting tests dealt to ``lanes`` lanes, each to the one that ends soonest so far,
    keeping their order within each lane."""
    dealt: list[list[str]] = [[] for _ in range(lanes)]
    load = [0.0] * lanes
    for nodeid in waiting:
        lane = load.index(min(load))
        dealt[lane].append(nodeid)
        load[lane] += seconds.get(nodeid, UNLISTED_SECONDS)
    return dealt


class LaneScheduling(LoadScheduling):  # type: ignore[misc]  # pytest-xdist ships no types
    """LoadScheduling whose last workers take the waiting tests first."""

    collection: list[str] | None

    def __init__(self, config: pytest.Config, log: Any, waiting: Path, seconds: dict[str, float]):
        super().__init__(config, log)
        self._waiting_file = waiting
        self._seconds = seconds
        self._lanes: dict[Any, list[int]] = {}

    @property
    def tests_finished(self) -> bool:
        return not any(self._lanes.values()) and bool(super().tests_finished)

    @property
    def has_pending(self) -> bool:
        return any(self._lanes.values()) or bool(super().has_pending)

    def schedule(self) -> None:
        if self.collection is not None:
            super().schedule()
            return
        if not self._check_nodes_have_same_collection():
            self.log("**Different tests collected, aborting run**")
            return
        collection: list[str] = next(iter(self.node2collection.values()))
        self.collection = collection
        index = {nodeid: n for n, nodeid in enumerate(collection)}
        # No file: the workers collected nothing (a wrong path, a collection error).
        written: list[str] = []
        if self._waiting_file.exists():
            written = json.loads(self._waiting_file.read_text(encoding="utf-8"))
            self._waiting_file.unlink()
        # The worker wrote them before -m or -k deselected any.
        waiting = [nodeid for nodeid in written if nodeid in index]
        nodes = self.nodes
        lanes = min(WAIT_LANES, len(nodes) - 1) if waiting else 0
        taken: set[int] = set()
        dealt = split_lanes(waiting, self._seconds, lanes)
        for node, lane in zip(nodes[len(nodes) - lanes :], dealt, strict=True):
            self._lanes[node] = [index[nodeid] for nodeid in lane]
            taken.update(self._lanes[node])
        self.pending[:] = [n for n in range(len(collection)) if n not in taken]
        for node in nodes:
            self.check_schedule(node)

    def check_schedule(self, node: Any, duration: float = 0) -> None:
        lane = self._lanes.get(node)
        if not lane:
            super().check_schedule(node, duration)
            return
        # One running and one queued, as the load scheduling keeps each worker.
        pending = self.node2pending[node]
        while lane and len(pending) < 2:
            test = lane.pop(0)
            pending.append(test)
            node.send_runtest_some([test])

    def remove_node(self, node: Any) -> str | None:
        self.pending.extend(self._lanes.pop(node, []))
        crashed: str | None = super().remove_node(node)
        return crashed
