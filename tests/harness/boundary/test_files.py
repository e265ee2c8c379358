"""The boundary of an agent's folder: paths split without asking the disk, files opened by
handle a name at a time without following a link, read from the handle that was checked
within a cap, written atomically without following a link; swaps of a folder for a link
at the worst moment change nothing."""

from __future__ import annotations

import os
import socket
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.boundary.files import (
    BoundaryError,
    Folder,
    entry_kind,
    make_folders,
    read_file,
    split_in_folder,
    split_relative,
    walk_stats,
    write_file,
)

SECRET = b"SECRET-outside-the-folder"
INSIDE = b"the agent's own file"


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """(the agent's folder, a folder outside it); both hold ``d/x`` (and ``x``)."""
    folder, outside = tmp_path / "work", tmp_path / "outside"
    for root, content in ((folder, INSIDE), (outside, SECRET)):
        (root / "d" / "e").mkdir(parents=True)
        for name in ("x", "d/x", "d/e/x"):
            (root / name).write_bytes(content)
    return folder, outside


@pytest.fixture
def opened(layout: tuple[Path, Path]) -> Iterator[Folder]:
    with Folder.open(layout[0]) as folder:
        yield folder


def refused(call: Callable[[], object]) -> BoundaryError:
    with pytest.raises(BoundaryError) as caught:
        call()
    return caught.value


# --------------------------------------------------------------------------- pure paths


@pytest.mark.parametrize(
    ("path", "names"),
    [
        ("a", ("a",)),
        ("a/b/c.txt", ("a", "b", "c.txt")),
        ("./a//b/", ("a", "b")),
        (".hidden/..x", (".hidden", "..x")),
    ],
)
def test_a_relative_path_is_split_into_its_names(path: str, names: tuple[str, ...]) -> None:
    assert split_relative(path) == names


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("..", "outside"),
        ("../etc/passwd", "outside"),
        ("a/../b", "outside"),
        ("a/b/..", "outside"),
        ("/etc/passwd", "outside"),
        ("", "missing"),
        ("./", "missing"),
        ("a\0b", "missing"),
    ],
)
def test_a_path_that_leaves_or_names_nothing_is_refused(path: str, reason: str) -> None:
    assert refused(lambda: split_relative(path)).reason == reason


@pytest.mark.parametrize(
    ("path", "names"),
    [
        ("rel/x", ("rel", "x")),
        ("/w/t/a/b", ("a", "b")),
        ("/w/t//a/./b", ("a", "b")),
        ("/w/t", ()),
        ("/w/t/", ()),
        (".", ()),
        ("/w/.views/v1/a", ("a",)),  # the folder as its sandbox shows it
    ],
)
def test_an_absolute_path_is_taken_lexically_inside_the_folder(
    path: str, names: tuple[str, ...]
) -> None:
    assert split_in_folder("/w/t", path, also=["/w/.views/v1"]) == names


@pytest.mark.parametrize(
    "path",
    ["/w/t2/a", "/w/ta", "/w", "/etc/passwd", "/w/t/../t2/a", "/w/t/a/../../x", "/", "/w/t/.."],
)
def test_an_absolute_path_elsewhere_is_outside(path: str) -> None:
    error = refused(lambda: split_in_folder("/w/t", path))
    assert error.reason == "outside" and error.code == "PERMISSION_DENIED"
    assert error.path == path and "outside your working folder /w/t" in error.message


@pytest.mark.parametrize("path", ["..", "../..", "./..", "a/../.."])
def test_a_relative_path_up_is_outside(path: str) -> None:
    assert refused(lambda: split_in_folder("/w/t", path)).reason == "outside"


def test_errors_say_what_a_tool_call_returns() -> None:
    link = BoundaryError("d/x", "link", at="d")
    assert (link.code, link.reason, link.path, link.at) == ("PERMISSION_DENIED", "link", "d/x", "d")
    assert "symbolic link (d)" in link.message and link.suggestion
    big = BoundaryError("big", "too-large", size=20, limit=10)
    assert big.code == "LIMIT_EXCEEDED" and "20 bytes" in big.message
    assert BoundaryError("x", "missing").code == "INVALID_INPUT"
    assert BoundaryError("x", "not-a-file", detail="a folder").message == (
        "x is a folder, not a file"
    )


# --------------------------------------------------------------------------- reading


def test_a_file_is_read_whole(opened: Folder) -> None:
    assert read_file(opened, ("d", "e", "x"), 100) == INSIDE
    assert read_file(opened, ("x",), len(INSIDE)) == INSIDE  # exactly at the cap


@pytest.mark.parametrize("at", [0, 1, 2])
def test_a_link_at_any_name_is_refused(layout: tuple[Path, Path], at: int) -> None:
    folder, outside = layout
    names = ("d", "e", "x")
    inside = folder.joinpath(*names[: at + 1])
    target = outside.joinpath(*names[: at + 1])
    os.rename(inside, folder / "moved")
    inside.symlink_to(target)
    with Folder.open(folder) as opened:
        error = refused(lambda: read_file(opened, names, 100))
    assert (error.reason, error.at, error.code) == (
        "link",
        "/".join(names[: at + 1]),
        "PERMISSION_DENIED",
    )


def test_a_link_to_a_file_inside_is_refused_too(layout: tuple[Path, Path]) -> None:
    folder, _ = layout
    (folder / "again").symlink_to("x")
    with Folder.open(folder) as opened:
        assert refused(lambda: read_file(opened, ("again",), 100)).reason == "link"


@pytest.mark.parametrize(
    ("names", "reason"),
    [
        (("nothing",), "missing"),
        (("d", "nothing", "x"), "missing"),
        (("x", "y"), "not-a-folder"),
        (("d",), "not-a-file"),
        ((), "not-a-file"),
    ],
)
def test_what_is_not_a_file_is_refused(opened: Folder, names: tuple[str, ...], reason: str) -> None:
    assert refused(lambda: read_file(opened, names, 100)).reason == reason


def test_a_fifo_or_a_socket_is_refused_without_blocking(layout: tuple[Path, Path]) -> None:
    folder, _ = layout
    os.mkfifo(folder / "fifo")  # opening it for reading would wait for a writer forever
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(folder / "sock"))
        with Folder.open(folder) as opened:
            for name in ("fifo", "sock"):
                error = refused(lambda: read_file(opened, (name,), 100))  # noqa: B023
                assert error.reason == "not-a-file" and "FIFO" in error.message


def test_a_device_is_refused_and_never_opened() -> None:
    with Folder.open(Path("/dev")) as dev:
        for name in ("null", "zero"):
            error = refused(lambda: read_file(dev, (name,), 100))  # noqa: B023
            assert error.reason == "not-a-file"


def test_a_file_over_the_cap_is_refused_with_its_size(opened: Folder) -> None:
    error = refused(lambda: read_file(opened, ("x",), len(INSIDE) - 1))
    assert (error.reason, error.size, error.limit) == ("too-large", len(INSIDE), len(INSIDE) - 1)


def test_a_file_that_grows_while_read_is_refused_not_cut_short(
    layout: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, _ = layout
    real_read = os.read

    def read_and_grow(fd: int, size: int) -> bytes:
        chunk = real_read(fd, size)
        with (folder / "x").open("ab") as out:  # the agent appends while the harness reads
            out.write(b"more" * 100)
        return chunk

    with Folder.open(folder) as opened:
        monkeypatch.setattr(os, "read", read_and_grow)
        error = refused(lambda: read_file(opened, ("x",), 200))
        monkeypatch.undo()
    assert error.reason == "too-large" and "grew while read" in error.message


# --------------------------------------------------------------------------- swaps


def swap_for_link(path: Path, target: Path) -> None:
    """What the agent does: its folder (or file) moved aside, a link in its place."""
    os.rename(path, path.with_name(path.name + ".moved"))
    path.symlink_to(target)


def hooked_open(
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    before: Callable[[], None] | None = None,
    after: Callable[[], None] | None = None,
) -> None:
    """``os.open`` of ``name`` relative to a folder handle runs ``before``/``after`` it: the
    worst moments for a swap."""
    real_open = os.open

    def open_hooked(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        hit = path == name and dir_fd is not None
        if hit and before is not None:
            before()
        fd = real_open(path, flags, mode, dir_fd=dir_fd)
        if hit and after is not None:
            after()
        return fd

    monkeypatch.setattr(os, "open", open_hooked)


def test_a_folder_swapped_for_a_link_after_it_was_opened_is_read_as_it_was(
    layout: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, outside = layout
    hooked_open(monkeypatch, "d", after=lambda: swap_for_link(folder / "d", outside / "d"))
    with Folder.open(folder) as opened:
        content = read_file(opened, ("d", "x"), 100)
    monkeypatch.undo()
    assert content == INSIDE and (folder / "d").is_symlink()


def test_a_folder_swapped_for_a_link_just_before_it_is_opened_is_refused(
    layout: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, outside = layout
    hooked_open(monkeypatch, "d", before=lambda: swap_for_link(folder / "d", outside / "d"))
    with Folder.open(folder) as opened:
        error = refused(lambda: read_file(opened, ("d", "x"), 100))
    monkeypatch.undo()
    assert (error.reason, error.at) == ("link", "d")


def test_a_file_swapped_for_a_link_after_it_was_checked_is_read_as_checked(
    layout: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, outside = layout
    hooked_open(monkeypatch, "x", after=lambda: swap_for_link(folder / "d" / "x", outside / "x"))
    with Folder.open(folder) as opened:
        content = read_file(opened, ("d", "x"), 100)
    monkeypatch.undo()
    assert content == INSIDE and (folder / "d" / "x").is_symlink()


def test_a_loop_swapping_a_folder_and_a_link_never_leaks_what_is_outside(
    layout: tuple[Path, Path],
) -> None:
    folder, outside = layout
    swapped = folder / "d"
    stop = threading.Event()

    def agent() -> None:  # as the agent's background loop: folder, link, folder, ...
        parked, link = folder / "parked", folder / "link"
        link.symlink_to(outside / "d")
        while not stop.is_set():
            os.rename(swapped, parked)
            os.rename(link, swapped)
            os.rename(swapped, link)
            os.rename(parked, swapped)

    loop = threading.Thread(target=agent)
    loop.start()
    read: list[bytes] = []
    reasons: set[str] = set()
    try:
        with Folder.open(folder) as opened:
            for _ in range(3000):
                try:
                    read.append(read_file(opened, ("d", "x"), 100))
                except BoundaryError as error:
                    reasons.add(error.reason)
    finally:
        stop.set()
        loop.join()
    assert set(read) <= {INSIDE}
    # Refused while swapped: a link, not there mid-swap, or seen changing.
    assert reasons <= {"link", "missing", "unreadable"}


# --------------------------------------------------------------------------- writing


def test_a_file_is_written_atomically_with_its_mode(
    opened: Folder, layout: tuple[Path, Path]
) -> None:
    folder, _ = layout
    write_file(opened, (".attachments", "a", "log.txt"), b"caf\xc3\xa9", mode=0o600)
    written = folder / ".attachments" / "a" / "log.txt"
    assert written.read_bytes() == b"caf\xc3\xa9"
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    write_file(opened, (".attachments", "a", "log.txt"), b"again")
    assert written.read_bytes() == b"again"
    assert sorted(p.name for p in written.parent.iterdir()) == ["log.txt"]  # no temp left


@pytest.mark.parametrize("at", [".attachments", ".attachments/sub", ".attachments/sub/key"])
def test_a_write_through_a_linked_name_stays_in_the_folder(
    layout: tuple[Path, Path], at: str
) -> None:
    folder, outside = layout
    link = folder / at
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside)
    before = sorted(p.name for p in outside.iterdir())
    with Folder.open(folder) as opened:
        write_file(opened, (".attachments", "sub", "key"), b"written")
    assert sorted(p.name for p in outside.iterdir()) == before
    assert (outside / "x").read_bytes() == SECRET
    assert not (folder / at).is_symlink()
    assert (folder / ".attachments" / "sub" / "key").read_bytes() == b"written"


def test_a_write_over_a_folder_is_refused(opened: Folder) -> None:
    error = refused(lambda: write_file(opened, ("d",), b"x"))
    assert error.reason == "not-a-file"


def test_folders_are_made_in_place_of_a_file_or_a_link(layout: tuple[Path, Path]) -> None:
    folder, outside = layout
    (folder / "made").symlink_to(outside)
    with Folder.open(folder) as opened:
        make_folders(opened, ("made", "x"))  # the link replaced by a folder, x made in it
        make_folders(opened, ("d", "x"))  # a file of the agent's, replaced by a folder
    assert (folder / "made" / "x").is_dir() and not (folder / "made").is_symlink()
    assert (folder / "d" / "x").is_dir() and (outside / "x").read_bytes() == SECRET


# --------------------------------------------------------------------------- listing


def test_a_walk_lists_everything_and_follows_no_link(layout: tuple[Path, Path]) -> None:
    folder, outside = layout
    (folder / "out").symlink_to(outside)
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref\n", encoding="utf-8")
    with Folder.open(folder) as opened:
        inodes = {info.st_ino for info in walk_stats(opened)}
        kept = {info.st_ino for info in walk_stats(opened, skip={".git"})}
    mine = {p.lstat().st_ino for p in [folder, *folder.rglob("*")]}
    assert inodes == mine
    assert kept == mine - {(folder / ".git").stat().st_ino, (folder / ".git/HEAD").stat().st_ino}
    assert not inodes & {p.lstat().st_ino for p in outside.rglob("*")}


def test_a_walk_stopped_early_leaves_no_handle_open(layout: tuple[Path, Path]) -> None:
    folder, _ = layout
    before = len(os.listdir("/proc/self/fd"))
    with Folder.open(folder) as opened:
        for stop_after in range(1, 6):
            walk = walk_stats(opened)
            for _ in range(stop_after):
                next(walk)
            walk.close()
    assert len(os.listdir("/proc/self/fd")) == before


def test_entry_kinds_are_told_without_following(layout: tuple[Path, Path]) -> None:
    folder, outside = layout
    (folder / "out").symlink_to(outside)
    os.mkfifo(folder / "fifo")
    with Folder.open(folder) as opened:
        kinds = {
            name: entry_kind(opened, tuple(name.split("/")))
            for name in ("x", "d", "out", "fifo", "nothing", "out/x", "x/y")
        }
    assert kinds == {
        "x": "file",
        "d": "folder",
        "out": "link",
        "fifo": "other",
        "nothing": "missing",
        "out/x": "missing",
        "x/y": "missing",
    }


def test_a_folder_that_is_not_there_is_said() -> None:
    assert refused(lambda: Folder.open(Path("/nowhere/at/all"))).reason == "missing"
