"""What a task's sandbox is shown at the repository's git directory (``git_shown``) and the
order its binds go in (``git_view.view_binds``): pure rules, no git."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.sandbox.layout import Bind
from harness.workspaces.git_settle import Layout
from harness.workspaces.git_shown import (
    filter_config,
    filter_packed_refs,
    is_task_ref,
    shown_head,
)
from harness.workspaces.git_view import view_binds

A, B, C = "a" * 40, "b" * 40, "c" * 40


@pytest.mark.parametrize(
    ("name", "task"),
    [
        ("refs/heads/harness/t-1", True),
        ("refs/heads/harness/_0123abcd", True),
        ("refs/remotes/origin/harness/t-1", True),
        ("refs/heads/main", False),
        ("refs/heads/harness-notes", False),
        ("refs/heads/feature/harness/x", False),
        ("refs/tags/harness/v1", False),
        ("refs/remotes/origin/main", False),
    ],
)
def test_a_task_ref_is_a_task_branch_or_a_remote_s_copy_of_one(name: str, task: bool) -> None:
    assert is_task_ref(name) is task


def test_packed_refs_lose_every_task_branch_and_its_peeled_line() -> None:
    packed = (
        "# pack-refs with: peeled fully-peeled sorted \n"
        f"{A} refs/heads/harness/t-1\n"
        f"{B} refs/heads/harness/t-2\n"
        f"{A} refs/heads/main\n"
        f"{C} refs/remotes/origin/harness/t-3\n"
        f"{B} refs/tags/v1\n"
        f"^{A}\n"
        f"{C} refs/tags/harness/v2\n"
        f"^{B}\n"
    ).encode()

    assert filter_packed_refs(packed).decode() == (
        "# pack-refs with: peeled fully-peeled sorted \n"
        f"{A} refs/heads/main\n"
        f"{B} refs/tags/v1\n"
        f"^{A}\n"
        f"{C} refs/tags/harness/v2\n"
        f"^{B}\n"
    )


def test_a_peeled_line_after_a_task_ref_goes_with_it() -> None:
    packed = f"{A} refs/heads/harness/t-1\n^{B}\n{C} refs/heads/main\n".encode()

    assert filter_packed_refs(packed) == f"{C} refs/heads/main\n".encode()
    assert filter_packed_refs(b"") == b""


def test_config_loses_other_tasks_branch_sections_and_keeps_the_rest() -> None:
    config = (
        b"[core]\n\trepositoryformatversion = 0\n"
        b'[branch "harness/t-1"]\n\tharnessBase = 111\n\tremote = origin\n'
        b'[branch "main"]\n\tremote = origin\n'
        b'[branch "harness/t-2"]\n\tharnessBase = 222\n'
        b'  [ Branch  "harness/t-3" ]\n\tharnessBase = 333\n'
        b'[remote "origin"]\n\turl = /somewhere\n'
        b'[branch "harness/t-\\"4"]\n\tharnessBase = 444\n'
    )

    shown = filter_config(config, "harness/t-2").decode()

    assert shown == (
        "[core]\n\trepositoryformatversion = 0\n"
        '[branch "main"]\n\tremote = origin\n'
        '[branch "harness/t-2"]\n\tharnessBase = 222\n'
        '[remote "origin"]\n\turl = /somewhere\n'
    )


@pytest.mark.parametrize(
    ("head", "shown"),
    [
        (b"ref: refs/heads/main\n", b"ref: refs/heads/main\n"),
        (b"ref: refs/heads/harness/t-1\n", b"ref: refs/heads/harness/t-2\n"),
        (f"{A}\n".encode(), b"ref: refs/heads/harness/t-2\n"),
        (None, b"ref: refs/heads/harness/t-2\n"),
    ],
)
def test_head_names_no_other_task_s_branch_or_commit(head: bytes | None, shown: bytes) -> None:
    assert shown_head(head, "harness/t-2") == shown


def test_binds_go_shown_folder_first_then_c_s_folders_then_what_the_task_writes() -> None:
    common, private = Path("/repo/.git"), Path("/ws/.sandbox/t-2")
    layout = Layout("t-2", common, common / "worktrees/t-2", private)

    binds = view_binds(Path("/ws/t-2"), layout, True, ("objects", "refs", "logs"))

    assert binds == (
        Bind("/ws/t-2", "/ws/t-2", True),
        Bind("/ws/.sandbox/t-2/common", "/repo/.git", False),
        Bind("/repo/.git/objects", "/repo/.git/objects", False),
        Bind("/repo/.git/refs", "/repo/.git/refs", False),
        Bind("/repo/.git/logs", "/repo/.git/logs", False),
        Bind("/repo/.git/harness/tasks/t-2", "/repo/.git/harness/task", False),
        Bind("/repo/.git/worktrees/t-2", "/repo/.git/worktrees/t-2", True),
        Bind("/ws/.sandbox/t-2/refs", "/repo/.git/refs/heads/harness", True),
        Bind("/ws/.sandbox/t-2/logs", "/repo/.git/logs/refs/heads/harness", True),
        Bind("/ws/.sandbox/t-2/objects", "/ws/.sandbox/t-2/objects", True),
    )
    # Each target at C is inside one bound before it (bubblewrap makes no folder in a
    # read-only bind: the harness made each there).
    for index, bind in enumerate(binds[2:-1], start=2):
        assert any(bind.target.startswith(b.target + "/") for b in binds[:index]), bind
    covered = view_binds(Path("/ws/t-2"), layout, True, ("refs",), ("refs/remotes/o/harness",))
    assert covered[2:4] == (
        Bind("/repo/.git/refs", "/repo/.git/refs", False),
        Bind("/ws/.sandbox/t-2/common/harness/empty", "/repo/.git/refs/remotes/o/harness", False),
    )
    reader = view_binds(Path("/ws/t-2"), layout, False, ("objects",))
    assert not any(b.writable for b in reader)
