"""Which tasks a caller of ``harness mcp`` sees: the local user every one; a Slack user those
without a thread, their own, those of channels they are in (never another's DM), and every
one as an admin."""

from __future__ import annotations

from harness.mcp_server.access import Person, sees
from harness.tasks.model import ThreadRef

ADMINS = {"UADMIN"}


def may_decide(user: str, requester: str | None) -> bool:
    return user in ADMINS or user == requester


def sees_task(user: str | None, channel: str | None, requester: str | None,
              member_of: set[str] | None = None) -> bool:  # fmt: skip
    person = Person(user, user or "local")
    thread = ThreadRef(channel, "1.2") if channel else None
    return sees(person, thread, requester, may_decide=may_decide, member_of=member_of)


def test_the_local_user_sees_every_task() -> None:
    assert sees_task(None, "D0ALICE", "UALICE")


def test_a_slack_user_sees_their_own_terminal_and_channel_tasks_not_others_dms() -> None:
    assert sees_task("UBOB", None, "UALICE")
    assert sees_task("UBOB", "C0TEAM", "UBOB")
    assert not sees_task("UBOB", "C0TEAM", "UALICE")
    assert sees_task("UBOB", "C0TEAM", "UALICE", member_of={"C0TEAM"})
    assert not sees_task("UBOB", "D0ALICE", "UALICE", member_of={"D0ALICE"})
    assert sees_task("UADMIN", "D0ALICE", "UALICE")
