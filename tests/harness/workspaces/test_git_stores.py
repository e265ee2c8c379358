"""The tasks' object stores in a repository (``git_stores``): the pure rules, and real git
reaching each store's objects through the pool while the repository's own store holds none."""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness.workspaces.git_stores import (
    POOL_ENTRY,
    alternate_entry,
    drop_store,
    ensure_store,
    pool_alternates,
    rename_store,
    store_env,
    store_names,
    store_path,
    with_entry,
)
from tests.support import git, make_repository


def test_an_entry_is_added_once_and_other_lines_are_kept() -> None:
    assert with_entry("", POOL_ENTRY) == "../harness/objects\n"
    assert with_entry("/ref/objects", POOL_ENTRY) == "/ref/objects\n../harness/objects\n"
    kept = "/ref/objects\n../harness/objects\n"
    assert with_entry(kept, POOL_ENTRY) == kept


def test_the_pool_lists_every_store_relative_to_itself_in_order() -> None:
    assert pool_alternates(["t-2", "_0a", "t-1"]) == "../tasks/_0a\n../tasks/t-1\n../tasks/t-2\n"
    assert pool_alternates([]) == ""


def test_an_alternate_with_a_colon_is_quoted() -> None:
    assert alternate_entry(Path("/a/b")) == "/a/b"
    assert alternate_entry(Path('/a:b/"c')) == '"/a:b/\\"c"'
    env = store_env(Path("/r/.git"), "t-1")
    assert env == {
        "GIT_OBJECT_DIRECTORY": "/r/.git/harness/tasks/t-1",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": "/r/.git/harness/own",
    }


def hash_into(store: Path, text: str) -> str:
    """Writes a blob into ``store`` as git run with ``store_env`` would."""
    done = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"],
        cwd=store.parent.parent.parent,  # the repository's git directory
        input=text,
        env={"GIT_OBJECT_DIRECTORY": str(store), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def test_the_repository_reaches_each_store_and_keeps_its_own_alternates(tmp_path: Path) -> None:
    repo = make_repository(tmp_path / "web")
    common = repo / ".git"
    (common / "objects/info").mkdir(exist_ok=True)
    (common / "objects/info/alternates").write_text("/elsewhere/objects\n", encoding="utf-8")

    one = hash_into(ensure_store(common, "t-1"), "one\n")
    two = hash_into(ensure_store(common, "_0a"), "two\n")
    rename_store(common, "_0a", "t-2")

    assert git(repo, "cat-file", "-p", one) == "one"
    assert git(repo, "cat-file", "-p", two) == "two"
    assert not (common / "objects" / one[:2]).exists()  # never in the repository's own
    assert sorted(store_names(common)) == ["t-1", "t-2"]
    assert (common / "objects/info/alternates").read_text() == (
        f"/elsewhere/objects\n{POOL_ENTRY}\n"
    )
    assert (common / "harness/objects/info/alternates").read_text() == (
        "../tasks/t-1\n../tasks/t-2\n"
    )
    ensure_store(common, "t-1")  # again: nothing changes
    assert (common / "harness/objects/info/alternates").read_text() == (
        "../tasks/t-1\n../tasks/t-2\n"
    )


def test_a_dropped_store_is_unlisted_and_gone(tmp_path: Path) -> None:
    repo = make_repository(tmp_path / "web")
    common = repo / ".git"
    ensure_store(common, "_0a")
    ensure_store(common, "t-1")

    drop_store(common, "_0a")
    drop_store(common, "_0a")  # again: nothing to do

    assert not store_path(common, "_0a").exists()
    assert (common / "harness/objects/info/alternates").read_text() == "../tasks/t-1\n"
    # git in the repository finds every alternate it is told of: no complaint.
    done = subprocess.run(
        ["git", "count-objects", "-v"], cwd=repo, capture_output=True, text=True, check=True
    )
    assert done.stderr == ""


def test_git_run_with_a_store_s_env_reads_the_repository_s_own_objects_and_not_the_pool(
    tmp_path: Path,
) -> None:
    repo = make_repository(tmp_path / "web")
    common = repo / ".git"
    (common / "objects/info").mkdir(exist_ok=True)
    (common / "objects/info/alternates").write_text("../../../elsewhere/objects\n")
    ensure_store(common, "t-2")
    theirs = hash_into(ensure_store(common, "t-1"), "theirs\n")
    readme = git(repo, "rev-parse", "main:README.md")
    env = {**store_env(common, "t-2"), "PATH": "/usr/bin:/bin"}

    def run(*args: str, text: str = "") -> str:
        done = subprocess.run(
            ["git", *args], cwd=repo, input=text, env=env, capture_output=True, text=True
        )
        return done.stdout.strip()

    # Another task's object is out of its sight, so it writes its own copy; the
    # repository's own objects it reads, and writes none of them again.
    assert run("cat-file", "-t", theirs) == ""
    assert run("hash-object", "-w", "--stdin", text="theirs\n") == theirs
    assert (store_path(common, "t-2") / theirs[:2] / theirs[2:]).is_file()
    assert run("cat-file", "-p", readme) == "readme"
    assert run("hash-object", "-w", "--stdin", text="readme\n") == readme
    assert not (store_path(common, "t-2") / readme[:2]).exists()
    assert (common / "harness/own/info/alternates").read_text() == (
        f"{tmp_path / 'elsewhere/objects'}\n"
    )
