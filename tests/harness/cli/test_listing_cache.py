"""``harness tasks`` remembers what it needs from a valid config.yaml (the tasks folder, the
admins) and lists without config.yaml's schema next time, printing the same; any change to
what the load read (config.yaml, a role file) is seen as if nothing had been remembered."""

from __future__ import annotations

import asyncio
import re
import subprocess
from pathlib import Path

import pytest

from harness.tasks.store import FileTaskStore
from tests.support import IMPORT_LINE, harness_imports

pytestmark = pytest.mark.subprocess


def said(done: subprocess.CompletedProcess[str]) -> tuple[int, str, str]:
    errors = "\n".join(line for line in done.stderr.splitlines() if not IMPORT_LINE.match(line))
    return done.returncode, done.stdout, errors


@pytest.fixture
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


async def _tasks(folder: Path, *slugs: str) -> None:
    store = FileTaskStore(folder)
    try:
        for slug in slugs:
            assert (await store.create(slug.replace("-", " "))).slug == slug
    finally:
        await store.close()


def test_a_second_listing_prints_the_same_without_config_yamls_schema(
    project_dir: Path, own_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asyncio.run(_tasks(project_dir / ".agents" / "tasks", "fix-the-footer", "add-a-page"))
    first_modules = harness_imports("tasks", cwd=project_dir)[1]  # loads config.yaml, remembers

    for args in (("tasks",), ("tasks", "--json")):
        again, modules = harness_imports(*args, cwd=project_dir)
        with monkeypatch.context() as nothing_remembered:
            nothing_remembered.setenv("XDG_CACHE_HOME", str(own_cache / "never-written"))
            loaded = harness_imports(*args, cwd=project_dir)[0]

        assert said(again) == said(loaded), args
        assert "fix-the-footer" in again.stdout
        assert not {m for m in modules if m.startswith("harness.config.")}
    assert "harness.config.schema" in first_modules


def test_config_yaml_broken_after_a_listing_gives_its_error_as_ever(
    project_dir: Path, own_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = project_dir / "config.yaml"
    assert harness_imports("tasks", cwd=project_dir)[0].returncode == 0  # remembered
    config.write_text(config.read_text(encoding="utf-8") + "\nlimts: {}\n", encoding="utf-8")

    broken = harness_imports("tasks", cwd=project_dir)[0]
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "never-used"))
    fresh = harness_imports("tasks", cwd=project_dir)[0]

    assert broken.returncode == 2
    assert "limts" in broken.stderr
    assert said(broken) == said(fresh)


def test_a_listing_follows_config_yaml_to_another_tasks_folder(
    project_dir: Path, own_cache: Path, tmp_path: Path
) -> None:
    asyncio.run(_tasks(project_dir / ".agents" / "tasks", "fix-the-footer"))
    asyncio.run(_tasks(tmp_path / "elsewhere", "moved-task"))
    config = project_dir / "config.yaml"
    assert "fix-the-footer" in harness_imports("tasks", cwd=project_dir)[0].stdout

    text = re.sub(r"(?m)^tasks: .*$", f"tasks: {tmp_path / 'elsewhere'}", config.read_text("utf-8"))
    config.write_text(text, encoding="utf-8")
    moved = harness_imports("tasks", cwd=project_dir)[0]

    assert "moved-task" in moved.stdout
    assert "fix-the-footer" not in moved.stdout


def test_a_role_file_broken_after_a_listing_is_refused(project_dir: Path, own_cache: Path) -> None:
    assert harness_imports("tasks", cwd=project_dir)[0].returncode == 0  # remembered
    role = project_dir / "roles" / "developer.md"
    role.write_text("---\nname: developer\ncategory: nonsense\n---\nbody\n", encoding="utf-8")

    done = harness_imports("tasks", cwd=project_dir)[0]

    assert done.returncode == 2
    assert "developer.md" in done.stderr


def test_a_damaged_cache_entry_is_a_miss(project_dir: Path, own_cache: Path) -> None:
    asyncio.run(_tasks(project_dir / ".agents" / "tasks", "fix-the-footer"))
    first = harness_imports("tasks", cwd=project_dir)[0]
    (entry,) = (own_cache / "harness").glob("listing-*.json")
    entry.write_text('{"key": 1', encoding="utf-8")

    again, modules = harness_imports("tasks", cwd=project_dir)

    assert said(again) == said(first)
    assert "harness.config.schema" in modules  # loaded in full, and remembered again
    assert harness_imports("tasks", cwd=project_dir)[0].stdout == first.stdout


def test_a_config_yaml_that_warns_warns_at_every_listing(
    project_dir: Path, own_cache: Path
) -> None:
    config = project_dir / "config.yaml"
    config.write_text(config.read_text("utf-8") + "\nwithholdEnv: [OLD_SECRET]\n", "utf-8")

    first, second = (harness_imports("tasks", cwd=project_dir)[0] for _ in range(2))

    for listing in (first, second):
        assert "withholdEnv is no longer used" in listing.stderr
    assert second.stdout == first.stdout
