"""Copying what the bot's ledger keeps between its SQLite file and the NATS store
(``harness store migrate``, beside the tasks): the keys seen (a Slack retry after the move is
still a duplicate), the requests taken on and not handled yet, the agents watched, and what
threads are still owed (with the steps of each already done). Only read from the source, so
an interrupted copy loses nothing; each owed entry is claimed in the destination as it is
copied, so running it again copies none twice."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from harness.tasks.ledger_protocol import Ledger, Owed


@dataclass(frozen=True)
class LedgerCopy:
    seen: int  # keys seen
    requests: int  # requests taken on, not handled yet
    watches: int
    owed: int  # entries copied now (those copied by an earlier run are not counted)


def copy_claim(entry: Owed) -> str:
    """The destination's claim on an owed entry of the source (its lane, id and data)."""
    what = json.dumps([entry.lane, entry.id, entry.data], sort_keys=True)
    return "migrated:" + hashlib.sha256(what.encode("utf-8")).hexdigest()[:32]


async def copy_ledger(source: Ledger, dest: Ledger) -> LedgerCopy:
    seen = await source.recent(0.0)
    for key, at in seen:
        await dest.remember([key], at)
    requests = await source.intake()
    for key, data, at in requests:
        await dest.remember([], at, intake={key: data})
    watches = await source.watches()
    for agent_id, data in watches:
        await dest.watch(agent_id, data)
    owed = 0
    for entry in await source.pending():
        copied = await dest.owe_once(copy_claim(entry), entry.lane, entry.data)
        if copied is None:
            continue  # an earlier run copied it
        if entry.step:
            await dest.advance(copied, entry.step)
        owed += 1
    return LedgerCopy(len(seen), len(requests), len(watches), owed)
