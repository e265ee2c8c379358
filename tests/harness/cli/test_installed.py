"""``harness``'s plug-ins and version are read from the installed metadata without
importlib.metadata, and come out as importlib.metadata says: the same commands in the same
order, one per name when an older install lists them again, the installed version, and
importlib.metadata itself asked where only it can read the layout (a zipped entry)."""

from __future__ import annotations

import importlib.metadata
import sys
import zipfile
from pathlib import Path

import pytest

from harness.cli import installed
from harness.cli.parser import COMMAND_GROUP
from harness.version import DISTRIBUTION, __version__

GROUP = "harness.test.commands"


def metadata_says(group: str) -> list[tuple[str, str]]:
    importlib.invalidate_caches()
    return [(point.name, point.value) for point in importlib.metadata.entry_points(group=group)]


def distribution(folder: Path, stem: str, version: str, points: str | None) -> None:
    info = folder / f"{stem}-{version}.dist-info"
    info.mkdir(parents=True)
    body = "This long description has\nVersion: 9.9.9\nin it, after the headers.\n"
    metadata = f"Metadata-Version: 2.4\nName: {stem}\nVersion: {version}\n\n{body}"
    (info / "METADATA").write_text(metadata, encoding="utf-8")
    if points is not None:
        (info / "entry_points.txt").write_text(points, encoding="utf-8")


def test_the_installed_front_ends_commands_are_found_as_importlib_metadata_finds_them() -> None:
    found = installed.entry_points(COMMAND_GROUP)

    assert ("bot", "bot.cli:register") in found
    assert found == metadata_says(COMMAND_GROUP)
    assert installed.load("bot.cli:register").__module__ == "bot.cli"


def test_the_installed_version_is_the_one_importlib_metadata_reads() -> None:
    assert installed.version(DISTRIBUTION, "never") == importlib.metadata.version(DISTRIBUTION)


def test_an_older_install_listing_the_commands_again_is_read_once_per_distribution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    points = f"# comment\n[console_scripts]\nx = a:b\n\n[{GROUP}]\nbot = new.cli:register\n"
    distribution(first, "Front_End", "2.0", points)
    distribution(first, "other", "1.0", f"[{GROUP}]\n  extra = other.cli : register [opt]\n")
    distribution(first, "plain", "1.0", None)  # no entry points at all
    # The same distribution again further down sys.path, and an older one under another name.
    distribution(second, "front_end", "1.0", f"[{GROUP}]\nbot = stale.cli:register\n")
    distribution(second, "front_end_old", "0.9", f"[{GROUP}]\nbot = old.cli:register\n")
    monkeypatch.setattr(sys, "path", [str(first), str(tmp_path / "missing"), str(second)])

    found = installed.entry_points(GROUP)

    assert found == metadata_says(GROUP)
    assert sorted(found) == [
        ("bot", "new.cli:register"),
        ("bot", "old.cli:register"),
        ("extra", "other.cli : register [opt]"),
    ]
    assert installed.version("front-end", "none") == "2.0"  # not the README's "Version:"
    assert installed.version("front-end", "none") == importlib.metadata.version("front-end")
    assert installed.version("not-installed", "from the source") == "from the source"


def test_a_zipped_entry_on_sys_path_is_read_by_importlib_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("zipped-1.0.dist-info/METADATA", "Name: zipped\nVersion: 1.0\n")
        zipped.writestr("zipped-1.0.dist-info/entry_points.txt", f"[{GROUP}]\nz = zipped:go\n")
    monkeypatch.setattr(sys, "path", [str(archive)])

    assert installed.entry_points(GROUP) == [("z", "zipped:go")]
    assert installed.version("zipped", "none") == "1.0"
    assert installed.version(DISTRIBUTION, __version__) == __version__  # not on this path
