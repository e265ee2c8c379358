"""Who may see a task, the one rule for Slack, ``harness mcp`` and the terminal: the operator
at this machine every one; a Slack user those without a thread, their own, those of channels
they are in (never another's DM), and every one as an admin."""

from __future__ import annotations

from harness.agents.authority import Authority
from harness.agents.visibility import (
    OPERATOR,
    Viewer,
    is_direct_message,
    may_see,
    needs_channels,
    visible,
)
from harness.tasks.model import TaskSummary, ThreadRef

may_decide = Authority(admins=("UADMIN",)).may_decide


def sees_task(viewer: Viewer, channel: str | None, requester: str | None,
              member_of: set[str] | None = None) -> bool:  # fmt: skip
    thread = ThreadRef(channel, "1.2") if channel else None
    return may_see(viewer, thread, requester, may_decide=may_decide, member_of=member_of)


def test_the_operator_sees_every_task() -> None:
    assert sees_task(OPERATOR, "D0ALICE", "UALICE")
    assert sees_task(OPERATOR, "C0TEAM", None)
    assert sees_task(OPERATOR, None, None)


def test_a_slack_user_sees_their_own_terminal_and_channel_tasks_not_others_dms() -> None:
    assert sees_task("UBOB", None, "UALICE")
    assert sees_task("UBOB", "C0TEAM", "UBOB")
    assert sees_task("UBOB", "D0BOB", "UBOB")
    assert not sees_task("UBOB", "C0TEAM", "UALICE")
    assert sees_task("UBOB", "C0TEAM", "UALICE", member_of={"C0TEAM"})
    assert not sees_task("UBOB", "C0TEAM", "UALICE", member_of={"C0OTHER"})
    assert not sees_task("UBOB", "D0ALICE", "UALICE", member_of={"D0ALICE"})
    assert sees_task("UADMIN", "D0ALICE", "UALICE")
    # A task whose requester is unknown: only the admins decide for it, as for a Stop.
    assert not sees_task("UBOB", "C0TEAM", None)
    assert sees_task("UADMIN", "C0TEAM", None)


def summary(slug: str, channel: str | None, requester: str | None) -> TaskSummary:
    thread = ThreadRef(channel, "1.2") if channel else None
    return TaskSummary(slug, "2024-05-01T10:00:00Z", slug, 1, thread, requester=requester)


TASKS = [
    summary("mine-dm", "D1", "U1"),
    summary("shared", "C1", "U1"),
    summary("terminal", None, None),
    summary("theirs-dm", "D3", "U3"),
]


def test_a_list_keeps_what_the_viewer_sees_in_order() -> None:
    def slugs(viewer: Viewer, member_of: set[str] | None) -> list[str]:
        shown = visible(viewer, TASKS, may_decide=may_decide, member_of=member_of)
        return [s.slug for s in shown]

    assert slugs("U1", None) == ["mine-dm", "shared", "terminal"]
    assert slugs("U2", {"C1"}) == ["shared", "terminal"]
    assert slugs("U2", None) == ["terminal"]  # Slack would not say: less, not more
    assert slugs("UADMIN", None) == ["mine-dm", "shared", "terminal", "theirs-dm"]
    assert slugs(OPERATOR, None) == ["mine-dm", "shared", "terminal", "theirs-dm"]


def test_slack_is_asked_for_channels_only_when_a_channels_task_is_listed() -> None:
    assert needs_channels("U2", [t.thread for t in TASKS])
    assert not needs_channels("U2", [ThreadRef("D1", "1.2"), None])
    assert not needs_channels("U2", [])
    assert not needs_channels(OPERATOR, [ThreadRef("C1", "1.2")])


def test_dm_channel_ids_start_with_d() -> None:
    assert is_direct_message("D0123") and not is_direct_message("C0123")
    assert not is_direct_message("G0123")
