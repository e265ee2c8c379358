"""Requests a full disk kept out of the ledger are also kept off that disk, in this user's
runtime folder: the next bot reads them back, their copy goes once handled, a folder another
user could write is never read, and a request that cannot be kept there either tells its
person to send it again should the bot restart. The real ledger and outbox (the process
stops aside, the fault test ``tests/faults/test_full_disk.py`` kills a real bot)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.background import Background
from bot.outbox import AgentRef, Outbox
from bot.poster import Poster, SlackClient
from bot.threads import ThreadLanes
from bot.unrecorded import UnrecordedRequests, deferred_folder
from harness.tasks.ledger import SqliteLedger
from harness.tasks.model import ThreadRef

pytestmark = pytest.mark.anyio

THREAD = ThreadRef("D1", "1700000000.000100")
KEY = "message:D1:1700000000.000100"
REQUEST = {"event": {"type": "message", "channel": "D1", "text": "fix it"}, "botUserId": "UB"}


@pytest.fixture
async def outbox(tmp_path: Path) -> AsyncIterator[Outbox]:
    ledger = await SqliteLedger.open(tmp_path / "tasks" / ".ledger.sqlite3")

    async def read_diff(_slug: str, _agent: str) -> str | None:
        return None

    async def on_given_up(_agent: AgentRef, _reason: str) -> None:
        return None

    client = SlackClient(token="xoxb-unused", base_url="http://127.0.0.1:9/")  # never called
    yield Outbox(ledger, client, Poster(client), read_diff=read_diff, on_given_up=on_given_up)
    await ledger.close()


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "runtime"
    folder.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(folder))
    return folder


def requests(outbox: Outbox) -> UnrecordedRequests:
    def request_of(key: str) -> dict[str, Any] | None:
        return REQUEST if key == KEY else None

    return UnrecordedRequests(outbox, ThreadLanes(Background()), request_of)


async def notices(outbox: Outbox) -> list[str]:
    return [str(step["message"]) for o in await outbox.ledger.pending() for step in o.data["steps"]]


async def nothing() -> None:
    return None


async def test_a_kept_request_is_read_back_by_the_next_bot_and_its_copy_goes_once_handled(
    outbox: Outbox, runtime: Path
) -> None:
    await requests(outbox).defer(KEY, THREAD, nothing)
    told = await notices(outbox)

    next_bot = requests(outbox)
    kept = await next_bot.kept()
    await next_bot.handled(KEY)

    assert kept == [(KEY, REQUEST)]
    assert len(told) == 1 and "no need to send it again" in told[0]
    assert "please send it again" not in told[0]
    assert list(runtime.rglob("*.json")) == []


async def test_requests_in_a_folder_another_user_could_write_are_never_read(
    outbox: Outbox, runtime: Path
) -> None:
    await requests(outbox).defer(KEY, THREAD, nothing)
    assert outbox.ledger.file is not None
    folder = deferred_folder(outbox.ledger.file)
    folder.chmod(0o777)

    assert await requests(outbox).kept() == []
    assert [p.name for p in folder.iterdir()] == [f"{KEY.replace(':', '_')}.json"]  # untouched


async def test_a_request_that_cannot_be_kept_anywhere_tells_its_person_to_send_it_again(
    outbox: Outbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "gone"))  # no such folder

    await requests(outbox).defer(KEY, THREAD, nothing)

    [told] = await notices(outbox)
    assert "please send it again" in told
    assert await requests(outbox).kept() == []
