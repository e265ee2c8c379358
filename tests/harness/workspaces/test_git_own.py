"""Which objects a repository's own object store holds (``git_own``), read from its loose
folders and pack indexes, against what git itself says."""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness.workspaces.git_own import OwnObjects, index_has, index_names
from tests.support import git, make_repository


def test_the_pack_index_and_loose_objects_are_read_as_git_wrote_them(tmp_path: Path) -> None:
    repo = make_repository(tmp_path / "web", {f"f{n}.txt": f"{n}\n" for n in range(40)})
    git(repo, "gc", "--quiet")
    (repo / "new.txt").write_text("loose\n", encoding="utf-8")
    loose = git(repo, "hash-object", "-w", "new.txt")
    [idx] = (repo / ".git/objects/pack").glob("*.idx")
    with idx.open("rb") as stdin:
        shown = subprocess.run(
            ["git", "show-index"], stdin=stdin, capture_output=True, text=True, check=True
        )
    listed = shown.stdout.split()[1::3]  # offset, name, crc on each line

    data = idx.read_bytes()
    assert sorted(name.hex() for name in index_names(data, 20)) == sorted(listed)
    assert all(index_has(data, bytes.fromhex(name), 20) for name in listed)
    absent = ["00" * 20, "ff" * 20, listed[0][:-1] + ("0" if listed[0][-1] != "0" else "1")]
    assert not any(index_has(data, bytes.fromhex(name), 20) for name in absent)
    with OwnObjects(repo / ".git/objects", 40) as own:
        assert all(own.has(name) for name in listed) and own.has(loose)
        assert not own.has("ab" * 20)
        assert own.packs_holding(listed[0]) and not own.packs_holding(loose)
