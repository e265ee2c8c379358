"""``harness usage`` as a user runs it (a subprocess) over a store of many tasks: the totals
are what the model billed (every paid agent's cost, simulated ones left out), grouped by
person, channel, role, routine, repository or day."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from harness.project import load_project
from harness.tasks.model import DispatchRecord, Task, ThreadRef, Trigger
from harness.tasks.task_json import dump_task
from harness.testing import spawn
from harness.testing.records import make_record

pytestmark = pytest.mark.subprocess

PEOPLE = ("U1", "U2", "U3")
CHANNELS = ("C1", "C2", "D1")


def harness(project_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return spawn.run(
        [sys.executable, "-m", "harness", "usage", *args,
         "--config", str(project_dir / "config.yaml")],
        capture_output=True, text=True, timeout=60, env={**os.environ}, check=False,
    )  # fmt: skip


def write_tasks(tasks_dir: Path, count: int) -> list[tuple[Task, DispatchRecord]]:
    """``count`` tasks of one to three agents each, written as task.json files."""
    rng = random.Random(7)
    made = []
    for n in range(count):
        slug = f"task-{n:04d}"
        nightly = (
            Trigger("nightly", "schedule", "2026-11-01T02:00:00Z", "-") if n % 5 == 0 else None
        )
        task = Task(
            slug,
            "2026-11-01T10:00:00Z",
            thread=ThreadRef(CHANNELS[n % 3], f"{n}.0"),
            requester=PEOPLE[n % 3],
            repository="web" if n % 2 else None,
            trigger=nightly,
        )
        records = []
        for d in range(rng.randint(1, 3)):
            day = 1 + (n + d) % 27
            record = make_record(
                f"a{n}x{d}", role=("developer", "reviewer")[d % 2], status="completed",
                cost_usd=round(rng.random(), 4), cost_simulated=n % 7 == 0,
                started_at=f"2026-11-{day:02d}T10:00:00Z",
            )  # fmt: skip
            records.append(record)
            made.append((task, record))
        (tasks_dir / slug).mkdir(parents=True)
        (tasks_dir / slug / "task.json").write_bytes(
            dump_task(Task(**{**vars(task), "dispatches": tuple(records)}))
        )
    return made


def test_usage_adds_up_to_what_the_model_billed_by_each_grouping(project_dir: Path) -> None:
    tasks_dir = load_project(project_dir / "config.yaml").config.tasks_dir
    made = write_tasks(tasks_dir, 1000)
    paid = [(t, r) for t, r in made if not r.cost_simulated]
    billed = sum(r.cost_usd or 0 for _, r in paid)

    by_person = harness(project_dir, "--json", "--by", "person", "--since", "2026-11-01")

    assert by_person.returncode == 0, by_person.stderr
    doc = json.loads(by_person.stdout)
    assert doc["totalUsd"] == pytest.approx(billed)
    assert sum(line["costUsd"] for line in doc["lines"]) == pytest.approx(billed)
    u1 = sum(r.cost_usd or 0 for t, r in paid if t.requester == "U1")
    assert {line["key"]: line["costUsd"] for line in doc["lines"]}["U1"] == pytest.approx(u1)
    by_channel = json.loads(harness(project_dir, "--json", "--by", "channel",
                                    "--since", "2026-11-01").stdout)  # fmt: skip
    assert {line["key"] for line in by_channel["lines"]} == {"C1", "C2", "(direct messages)"}
    routines = json.loads(harness(project_dir, "--json", "--by", "routine",
                                  "--since", "2026-11-01").stdout)  # fmt: skip
    nightly = sum(r.cost_usd or 0 for t, r in paid if t.trigger is not None)
    assert {ln["key"]: ln["costUsd"] for ln in routines["lines"]}["nightly"] == pytest.approx(
        nightly
    )
    late = json.loads(harness(project_dir, "--json", "--by", "day", "--since", "2026-11-20").stdout)
    assert [ln["key"] for ln in late["lines"]] == sorted(
        {r.started_at[:10] for _, r in paid if r.started_at >= "2026-11-20"},
        key=lambda day: -sum(r.cost_usd or 0 for _, r in paid if r.started_at[:10] == day),
    )
    text = harness(project_dir, "--by", "role", "--since", "2026-11-01").stdout
    assert "Spend since 2026-11-01 (UTC), by role:" in text
    assert f"total  {billed:>10.4f}  {len(paid):>6}".split() == text.splitlines()[-1].split()


def test_a_since_that_is_not_a_date_is_refused_plainly(project_dir: Path) -> None:
    done = harness(project_dir, "--since", "last week")

    assert done.returncode != 0
    assert "--since 'last week' is not a date" in done.stderr
    assert "YYYY-MM-DD" in done.stderr and "Traceback" not in done.stderr


def test_usage_opens_no_harness_so_it_starts_fast(project_dir: Path) -> None:
    done = spawn.run(
        [sys.executable, "-X", "importtime", "-m", "harness", "usage",
         "--config", str(project_dir / "config.yaml")],
        capture_output=True, text=True, timeout=60, env={**os.environ}, check=False,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    loaded = {line.split("|")[-1].strip() for line in done.stderr.splitlines()}
    for heavy in ("harness.agents.orchestrator", "harness.runtime", "claude_agent_sdk", "nats"):
        assert heavy not in loaded
