"""What the workspaces read of an agent's folder (its ``.git`` link file, its files' times)
is read by handle: a link is not followed, a FIFO never blocks, a swapped folder is never
walked through."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.workspaces.files import (
    folder_kind,
    latest_mtime,
    modified_since,
    worktree_admin_dir,
    worktree_common_dir,
)


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    """A folder laid out as a linked worktree: ``.git`` names an admin folder whose
    ``commondir`` names the repository's git directory."""
    common, admin, folder = tmp_path / "repo.git", tmp_path / "repo.git/worktrees/t", tmp_path / "t"
    admin.mkdir(parents=True)
    (admin / "commondir").write_text("../..\n", encoding="utf-8")
    folder.mkdir()
    (folder / ".git").write_text(f"gitdir: {admin}\n", encoding="utf-8")
    assert worktree_common_dir(folder) == common
    return folder


def test_a_worktree_is_known_by_its_link_file(worktree: Path, tmp_path: Path) -> None:
    assert folder_kind(worktree) == "worktree"
    assert worktree_admin_dir(worktree) == str(tmp_path / "repo.git/worktrees/t")


def test_a_link_in_place_of_the_git_file_is_not_followed(worktree: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.git"
    elsewhere.write_text(f"gitdir: {tmp_path / 'repo.git/worktrees/t'}\n", encoding="utf-8")
    (worktree / ".git").unlink()
    (worktree / ".git").symlink_to(elsewhere)
    assert folder_kind(worktree) == "scratch"
    assert worktree_admin_dir(worktree) is None
    assert worktree_common_dir(worktree) is None


def test_a_fifo_in_place_of_a_link_file_never_blocks(worktree: Path, tmp_path: Path) -> None:
    # Opening a FIFO for reading waits for a writer: the harness would hang for good.
    (tmp_path / "repo.git/worktrees/t/commondir").unlink()
    os.mkfifo(tmp_path / "repo.git/worktrees/t/commondir")
    assert worktree_common_dir(worktree) is None
    (worktree / ".git").unlink()
    os.mkfifo(worktree / ".git")
    assert worktree_admin_dir(worktree) is None and worktree_common_dir(worktree) is None


def test_a_huge_git_file_is_not_read(worktree: Path) -> None:
    (worktree / ".git").write_bytes(b"gitdir: " + b"x" * 100_000)
    assert worktree_admin_dir(worktree) is None


def test_times_are_those_of_the_folder_never_through_a_link(tmp_path: Path) -> None:
    folder, outside = tmp_path / "work", tmp_path / "outside"
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "app.py").write_text("x\n", encoding="utf-8")
    (folder / ".git").mkdir()
    outside.mkdir()
    (outside / "new.txt").write_text("later\n", encoding="utf-8")
    (folder / "out").symlink_to(outside)
    for path in [folder, folder / "src", folder / "src" / "app.py", folder / ".git"]:
        os.utime(path, (1000, 1000))
    os.utime(folder / "out", (1000, 1000), follow_symlinks=False)
    os.utime(outside / "new.txt", (9000, 9000))
    (folder / ".git" / "HEAD").write_text("ref\n", encoding="utf-8")
    os.utime(folder / ".git" / "HEAD", (9000, 9000))
    os.utime(folder / ".git", (1000, 1000))
    assert latest_mtime(folder) == 1000
    assert not modified_since(folder, 1001)
    os.utime(folder / "src" / "app.py", (5000, 5000))
    assert latest_mtime(folder) == 5000 and modified_since(folder, 4000)
