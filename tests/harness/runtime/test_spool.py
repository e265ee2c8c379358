"""What a harness or a worker keeps owing past its own end: the spool keeps it whole, never
follows a link planted in its folder, and a restarted harness takes up only what a stopped
run left (a live process's debts stay its own)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from harness.runtime.aftercare import Aftercare, Owed
from harness.spool import Spool

pytestmark = pytest.mark.anyio


async def test_an_entry_kept_is_read_back_until_it_is_dropped(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "owed")
    await spool.put("agent-1", {"events": ["a", "b"]})
    kept = await spool.entries()
    await spool.drop("agent-1")

    assert kept == [("agent-1", {"events": ["a", "b"]})]
    assert await spool.entries() == []
    assert (tmp_path / "owed").stat().st_mode & 0o077 == 0  # this user's only


async def test_an_entry_goes_with_its_files_beside_and_never_leaves_one_behind(
    tmp_path: Path,
) -> None:
    spool = Spool(tmp_path / "owed")
    await spool.put_beside("agent-1", ".diff", b"+new footer\n")
    await spool.put("agent-1", {"status": "completed"})
    await spool.put_beside("agent-2", ".diff", b"+new header\n")
    await spool.put("agent-2", {"status": "completed"})
    stuck = tmp_path / "owed" / "agent-2.diff"
    stuck.unlink()
    (stuck / "held").mkdir(parents=True)  # a file the disk will not remove

    await spool.drop("agent-1", beside=(".diff",))
    await spool.drop("agent-2", beside=(".diff",))

    left = sorted(path.name for path in (tmp_path / "owed").iterdir())
    # agent-1 whole; agent-2's entry stays, to be delivered again, never a diff without it.
    assert left == ["agent-2.diff", "agent-2.json"]
    assert await spool.entries() == [("agent-2", {"status": "completed"})]


async def test_a_link_planted_in_the_spool_is_set_aside_and_never_followed(
    tmp_path: Path,
) -> None:
    spool = Spool(tmp_path / "owed")
    await spool.put("agent-1", {"events": []})
    secret = tmp_path / "secret.json"
    secret.write_text('{"events": ["not yours"]}', encoding="utf-8")
    os.symlink(secret, tmp_path / "owed" / "agent-2.json")

    kept = await spool.entries()

    assert kept == [("agent-1", {"events": []})]
    assert (tmp_path / "owed" / "agent-2.json.unreadable").is_symlink()
    assert secret.read_text(encoding="utf-8") == '{"events": ["not yours"]}'


async def test_a_restarted_harness_takes_up_a_stopped_runs_kills_and_leaves_a_live_ones(
    tmp_path: Path,
) -> None:
    spool = Spool(tmp_path)
    now = time.time()
    for agent, run in (("a1", "ended-run"), ("a2", "live-run")):
        owed = Owed("kill", agent, "fix-it", f"stopped by {agent}", now, run)
        await spool.put(owed.name, dict(owed.to_json()))

    async def alive(run_id: str) -> bool:
        return run_id == "live-run"

    care = Aftercare(lambda: None)  # NATS not reached: the kills stay owed
    try:
        taken = await care.resume(tmp_path, "this-run", alive)
        owed_now = care.owed_kills
    finally:
        await care.close()
    kept = {name: data["run"] for name, data in await spool.entries()}

    assert [owed.agent_id for owed in taken] == ["a1"]
    assert owed_now == ["a1"]
    assert kept == {"kill-a1": "this-run", "kill-a2": "live-run"}  # still owed after close
