"""What every store must do as a ``TaskStore`` (tasks, their records and decisions), as a
pytest suite both stores run.

Subclass it in a test module (its name starting with ``Test``) and give it a ``store`` fixture
yielding a fresh, empty store (and closing it afterwards); pytest runs every test below
against it. Behaviour only one store has (files on disk, the index) is tested next to that
store, not here.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest

from harness.errors import AgentNotFoundError, InvalidSlugError, TaskNotFoundError
from harness.tasks.model import AgentResult, Decision, PullRequest, ThreadRef, Trigger
from harness.tasks.spending import Spend
from harness.tasks.store import Store
from harness.testing.records import make_record

TRAVERSAL_SLUGS = ["../x", "../../etc", "a/../b", "/tmp"]


@pytest.mark.anyio
class TaskStoreConformance:
    """The TaskStore contract: tasks, their dispatches, decisions and threads."""

    async def test_create_then_get_returns_the_same_task(self, store: Store) -> None:
        thread = ThreadRef("C1", "1700000000.000100")
        task = await store.create("Add a settings page", thread)

        assert task.slug == "add-a-settings-page"
        assert task.description == "Add a settings page"
        assert task.thread == thread
        assert task.dispatches == ()
        assert datetime.fromisoformat(task.created).utcoffset() is not None
        assert await store.get(task.slug) == task

    async def test_a_task_keeps_the_repository_it_was_created_for(self, store: Store) -> None:
        task = await store.create("Fix the login", repository="web")

        assert (await store.get(task.slug)).repository == "web"
        assert (await store.create("Fix the logout")).repository is None

    async def test_allowed_rules_are_kept_once_each(self, store: Store) -> None:
        slug = (await store.create("Run the tests")).slug
        await store.allow(slug, "Bash(pytest:*)")
        await store.allow(slug, "Bash(make:*)")
        await store.allow(slug, "Bash(pytest:*)")

        assert (await store.get(slug)).allowed == ("Bash(pytest:*)", "Bash(make:*)")

    async def test_a_pull_request_is_kept_with_its_checks_and_can_be_forgotten(
        self, store: Store
    ) -> None:
        slug = (await store.create("Fix the login", repository="web")).slug
        pull = PullRequest(
            repository="acme/web", number=7, url="https://github.com/acme/web/pull/7",
            branch=f"harness/{slug}", base="main", opened_by="alice", requested_by="U1",
            head_commit="abc123", checks="failed", failing=("tests",), fix_tries=1,
        )  # fmt: skip
        await store.set_pull_request(slug, pull)
        await store.save_dispatch(slug, make_record("a1"))

        kept = await store.get(slug)
        assert kept.pull_request == pull and len(kept.dispatches) == 1
        assert [s.pull_request for s in await store.summaries()] == [pull.url]
        await store.set_pull_request(slug, None)
        assert (await store.get(slug)).pull_request is None
        assert [s.pull_request for s in await store.summaries()] == [None]

    async def test_create_makes_slugs_unique(self, store: Store) -> None:
        slugs = [(await store.create("Fix the bug")).slug for _ in range(3)]

        assert slugs == ["fix-the-bug", "fix-the-bug-2", "fix-the-bug-3"]

    async def test_concurrent_creates_with_one_description_get_distinct_slugs(
        self, store: Store
    ) -> None:
        tasks = await asyncio.gather(*(store.create("Same request") for _ in range(4)))

        assert sorted(task.slug for task in tasks) == [
            "same-request",
            "same-request-2",
            "same-request-3",
            "same-request-4",
        ]

    async def test_get_unknown_slug_raises_task_not_found(self, store: Store) -> None:
        with pytest.raises(TaskNotFoundError):
            await store.get("no-such-task")

    @pytest.mark.parametrize("slug", TRAVERSAL_SLUGS)
    async def test_path_traversal_slugs_are_rejected_everywhere(
        self, store: Store, slug: str
    ) -> None:
        with pytest.raises(InvalidSlugError):
            await store.get(slug)
        with pytest.raises(InvalidSlugError):
            await store.save_dispatch(slug, make_record("a1"))
        with pytest.raises(InvalidSlugError):
            await store.add_decision(slug, Decision("t", "b", "2026-01-01T00:00:00Z"))
        with pytest.raises(InvalidSlugError):
            await store.bind_thread(slug, ThreadRef("C", "1"))
        with pytest.raises(InvalidSlugError):
            store.append_jsonl(slug, "audit.jsonl", {"x": 1})
        with pytest.raises(InvalidSlugError):
            await store.read_jsonl(slug, "audit.jsonl")
        with pytest.raises(InvalidSlugError):
            await store.repair(slug)
        with pytest.raises(InvalidSlugError):
            await store.delete(slug)

    async def test_list_and_summaries_are_newest_first(self, store: Store) -> None:
        for name in ("first", "second", "third"):
            await store.create(name)

        assert [task.slug for task in await store.list()] == ["third", "second", "first"]
        assert [line.slug for line in await store.summaries()] == ["third", "second", "first"]

    async def test_an_empty_store_lists_nothing(self, store: Store) -> None:
        assert await store.list() == []
        assert await store.summaries() == []
        assert await store.unfinished() == []

    async def test_summaries_count_dispatches_and_show_the_last_one(self, store: Store) -> None:
        thread = ThreadRef("C1", "1.2")
        slug = (await store.create("Busy", thread)).slug
        await store.create("Idle")
        await store.save_dispatch(slug, make_record("a1", status="completed"))
        await store.save_dispatch(slug, make_record("a2", role="reviewer", status="failed"))

        idle, busy = await store.summaries()

        assert (busy.slug, busy.description, busy.dispatch_count) == (slug, "Busy", 2)
        assert (busy.thread, busy.last_role, busy.last_status) == (thread, "reviewer", "failed")
        assert busy.created == (await store.get(slug)).created
        assert (idle.dispatch_count, idle.thread, idle.last_role, idle.last_status) == (
            0,
            None,
            None,
            None,
        )

    async def test_summaries_give_each_tasks_status_and_cost(self, store: Store) -> None:
        done = (await store.create("Done")).slug
        busy = (await store.create("Busy")).slug
        fresh = (await store.create("Fresh")).slug
        await store.save_dispatch(done, make_record("a1", status="completed", cost_usd=0.25))
        await store.save_dispatch(done, make_record("a2", status="failed", cost_usd=0.5))
        await store.save_dispatch(busy, make_record("b1", status="completed", cost_usd=1.0))
        await store.save_dispatch(busy, make_record("b2", status="running", parent_id="b1"))

        lines = {line.slug: line for line in await store.summaries()}

        assert (lines[done].status, lines[done].cost_usd) == ("failed", 0.75)
        assert (lines[busy].status, lines[busy].cost_usd) == ("running", 1.0)
        assert (lines[fresh].status, lines[fresh].cost_usd) == ("new", None)

    # ---------------------------------------------------------------- deleting

    async def test_a_deleted_task_is_gone_with_its_logs_and_text_files(self, store: Store) -> None:
        thread = ThreadRef("C1", "1.1")
        slug = (await store.create("Do it", thread)).slug
        other = (await store.create("Keep it")).slug
        await store.save_dispatch(slug, make_record("a1", status="completed"))
        store.append_jsonl(slug, "journals/a1.jsonl", {"n": 1})
        await store.write_text(slug, "diffs/a1.diff", "+ x\n")

        await store.delete(slug)

        with pytest.raises(TaskNotFoundError):
            await store.get(slug)
        with pytest.raises(TaskNotFoundError):
            await store.read_jsonl(slug, "journals/a1.jsonl")
        with pytest.raises(AgentNotFoundError):
            await store.record("a1")
        assert not await store.knows_agent("a1")
        assert await store.find_by_thread(thread) is None
        assert [task.slug for task in await store.list()] == [other]
        assert [line.slug for line in await store.summaries()] == [other]
        assert await store.unfinished() == []

    async def test_deleting_a_missing_task_raises_task_not_found(self, store: Store) -> None:
        with pytest.raises(TaskNotFoundError):
            await store.delete("no-such-task")

    async def test_a_deleted_slug_is_free_for_a_new_task_that_starts_empty(
        self, store: Store
    ) -> None:
        slug = (await store.create("Fix the bug")).slug
        await store.save_dispatch(slug, make_record("a1", status="completed"))
        store.append_jsonl(slug, "audit.jsonl", {"old": True})  # still queued when deleted

        await store.delete(slug)
        again = await store.create("Fix the bug")

        assert again.slug == slug
        assert again.dispatches == ()
        assert await store.read_jsonl(slug, "audit.jsonl") == []
        assert await store.read_text(slug, "diffs/a1.diff") is None

    # ---------------------------------------------------------------- damaged tasks
    # (Damaging a task is the file store's own business: tests/harness/tasks/test_repair.py.)

    async def test_readable_tasks_are_never_listed_as_damaged(self, store: Store) -> None:
        assert await store.damaged() == []
        slug = (await store.create("Do it", ThreadRef("C1", "1.1"))).slug
        await store.save_dispatch(slug, make_record("a1", status="completed"))

        assert await store.damaged() == []

    async def test_repair_leaves_a_readable_task_as_it_is(self, store: Store) -> None:
        slug = (await store.create("Do it", ThreadRef("C1", "1.1"))).slug
        task = await store.save_dispatch(slug, make_record("a1", status="completed"))

        report = await store.repair(slug)

        assert (report.slug, report.repaired, report.moved_to) == (slug, False, None)
        assert await store.get(slug) == task

    async def test_repair_of_a_missing_task_raises_task_not_found(self, store: Store) -> None:
        with pytest.raises(TaskNotFoundError):
            await store.repair("no-such-task")

    # ---------------------------------------------------------------- dispatches

    async def test_save_dispatch_inserts_then_replaces_by_agent_id(self, store: Store) -> None:
        slug = (await store.create("Do it")).slug
        await store.save_dispatch(slug, make_record("a1"))
        await store.save_dispatch(slug, make_record("a2"))
        done = make_record("a1", status="completed", result=AgentResult("done", ("x.py",)))

        task = await store.save_dispatch(slug, done)

        assert [d.agent_id for d in task.dispatches] == ["a1", "a2"]
        assert task.dispatches[0] == done
        assert await store.get(slug) == task

    async def test_save_dispatch_on_a_missing_task_raises_task_not_found(
        self, store: Store
    ) -> None:
        with pytest.raises(TaskNotFoundError):
            await store.save_dispatch("missing", make_record("a1"))

    async def test_twenty_concurrent_saves_on_one_task_keep_all_twenty(self, store: Store) -> None:
        slug = (await store.create("Busy task")).slug

        await asyncio.gather(*(store.save_dispatch(slug, make_record(f"a{i}")) for i in range(20)))

        task = await store.get(slug)
        assert sorted(d.agent_id for d in task.dispatches) == sorted(f"a{i}" for i in range(20))
        assert (await store.summaries())[0].dispatch_count == 20

    async def test_record_finds_the_latest_record_of_an_agent_in_any_task(
        self, store: Store
    ) -> None:
        first = (await store.create("First")).slug
        second = (await store.create("Second")).slug
        await store.save_dispatch(first, make_record("a1"))
        await store.save_dispatch(second, make_record("b1"))
        await store.save_dispatch(first, make_record("a1", status="completed"))

        assert (await store.record("a1")).status == "completed"
        assert (await store.record("b1")).agent_id == "b1"

    async def test_record_of_an_unknown_agent_raises_agent_not_found(self, store: Store) -> None:
        await store.save_dispatch((await store.create("Do it")).slug, make_record("a1"))

        with pytest.raises(AgentNotFoundError):
            await store.record("nobody")

    async def test_knows_agent_says_which_agent_ids_are_taken(self, store: Store) -> None:
        await store.save_dispatch((await store.create("Do it")).slug, make_record("a1"))

        assert await store.knows_agent("a1")
        assert not await store.knows_agent("a2")

    async def test_unfinished_lists_queued_and_running_dispatches_with_their_task(
        self, store: Store
    ) -> None:
        old = (await store.create("Old")).slug
        new = (await store.create("New")).slug
        await store.save_dispatch(old, make_record("o1", status="running"))
        await store.save_dispatch(old, make_record("o2", status="completed"))
        await store.save_dispatch(new, make_record("n1", status="queued"))
        await store.save_dispatch(new, make_record("n2", status="killed"))
        await store.save_dispatch(new, make_record("n3", status="running"))
        await store.save_dispatch(old, make_record("o1", status="failed"))

        unfinished = await store.unfinished()

        assert [(slug, record.agent_id) for slug, record in unfinished] == [
            (new, "n1"),
            (new, "n3"),
        ]
        assert unfinished[0][1] == make_record("n1", status="queued")

    async def test_add_decision_appends_in_order(self, store: Store) -> None:
        slug = (await store.create("Decide")).slug
        first = Decision("Use REST", "simpler", "2026-01-01T10:00:00Z", "pm-1", "pm")
        second = Decision("Use SQLite", "embedded", "2026-01-01T10:01:00Z")

        await store.add_decision(slug, first)
        task = await store.add_decision(slug, second)

        assert task.decisions == (first, second)
        assert (await store.get(slug)).decisions == (first, second)

    # ---------------------------------------------------------------- threads

    async def test_bind_thread_then_find_by_thread(self, store: Store) -> None:
        slug = (await store.create("Do it")).slug
        await store.create("Other")
        thread = ThreadRef("C1", "111.222")

        bound = await store.bind_thread(slug, thread)

        assert bound.thread == thread
        assert await store.find_by_thread(thread) == bound
        assert await store.find_by_thread(ThreadRef("C1", "999.000")) is None

    async def test_the_requester_is_kept_from_creation_or_set_later(self, store: Store) -> None:
        asked = await store.create("Do it", requester="U1")
        older = await store.create("From before requesters were kept")

        await store.set_requester(older.slug, "U2")

        assert (await store.get(asked.slug)).requester == "U1"
        assert (await store.get(older.slug)).requester == "U2"

    async def test_rebinding_a_task_moves_it_to_the_new_thread(self, store: Store) -> None:
        old, new = ThreadRef("C1", "1.1"), ThreadRef("C1", "2.2")
        slug = (await store.create("Do it", old)).slug

        await store.bind_thread(slug, new)

        assert await store.find_by_thread(old) is None
        found = await store.find_by_thread(new)
        assert found is not None and found.slug == slug

    async def test_spending_names_who_pays_for_each_paid_agent_since_a_day(
        self, store: Store
    ) -> None:
        nightly = Trigger(routine="nightly", kind="schedule", at="2026-11-02T02:00:00Z", why="-")
        asked = await store.create("Fix it", ThreadRef("C1", "1.1"), "web", requester="U1")
        fired = await store.create("Nightly", ThreadRef("C2", "2.2"), trigger=nightly)
        await store.save_dispatch(
            asked.slug,
            make_record("a1", status="completed", cost_usd=0.5, started_at="2026-11-02T23:59:00Z"),
        )
        await store.save_dispatch(
            asked.slug,
            make_record(  # drafted: the requester pays
                "a2",
                role="reviewer",
                parent_id="a1",
                status="running",
                budget_usd=2.0,
                started_at="2026-11-03T00:01:00+01:00",
            ),
        )
        await store.save_dispatch(
            asked.slug,
            make_record(  # a scripted model's: not paid
                "a3",
                status="completed",
                cost_usd=9.0,
                cost_simulated=True,
                started_at="2026-11-03T10:00:00Z",
            ),
        )
        await store.save_dispatch(fired.slug, make_record(
            "a4", status="failed", cost_usd=0.25, requested_by="U2",
            started_at="2026-10-31T10:00:00Z"))  # fmt: skip

        rows = {row.agent_id: row for row in await store.spending("2026-11-01")}

        assert rows == {
            "a1": Spend(asked.slug, "a1", "2026-11-02", "developer", "U1", "C1", None, "web",
                        cost_usd=0.5),
            "a2": Spend(asked.slug, "a2", "2026-11-02", "reviewer", "U1", "C1", None, "web",
                        held_usd=2.0),
        }  # fmt: skip
        await store.save_dispatch(asked.slug, make_record("a2", role="reviewer", cost_usd=0.75,
            status="completed", started_at="2026-11-02T23:01:00Z"))  # fmt: skip
        everything = {row.agent_id: row for row in await store.spending("0000-00-00")}
        assert everything["a2"].cost_usd == 0.75 and everything["a2"].held_usd is None
        assert everything["a4"] == Spend(fired.slug, "a4", "2026-10-31", "developer", "U2",
                                         "C2", "nightly", None, cost_usd=0.25)  # fmt: skip
        await store.delete(asked.slug)
        assert [row.agent_id for row in await store.spending("0000-00-00")] == ["a4"]

    async def test_limits_raised_for_a_task_are_kept_with_it(self, store: Store) -> None:
        slug = (await store.create("Fix it", requester="U1")).slug

        await store.raise_limits(slug, "UADMIN")

        assert (await store.get(slug)).limits_raised_by == "UADMIN"
