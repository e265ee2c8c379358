"""A ``path`` repository of ``workspaces.repositories`` is checked when config.yaml loads: a
folder that is missing or not a git repository would otherwise pass, and fail each task that
names it (as a run's reason, again at each retry). A ``url`` repository is cloned on first
use and not checked here. Blocking (a few ``stat`` calls)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from harness.config.repository_schema import RepositorySettings
from harness.errors import ConfigError


def is_git_repository(path: Path) -> bool:
    """A work tree (``.git`` a folder, or a file in a linked worktree) or a bare repository."""
    if (path / ".git").exists():
        return True
    return (path / "HEAD").is_file() and (path / "objects").is_dir() and (path / "refs").is_dir()


def check_repository_paths(file: Path, repositories: Mapping[str, RepositorySettings]) -> None:
    """Raises ConfigError, naming the file, the field and the fix, for the first ``path``
    repository that is missing or not a git repository."""
    for name, repository in repositories.items():
        path = repository.path
        if path is None:
            continue
        field = f"workspaces.repositories.{name}.path"
        if not path.exists():
            raise ConfigError(
                str(file),
                field,
                f"{path} does not exist",
                fix="point `path:` to a local git clone (relative paths start at config.yaml's "
                "folder), clone it there, or give the repository's `url:` instead to have it "
                "cloned",
            )
        if not path.is_dir():
            raise ConfigError(
                str(file), field, f"{path} is a file", fix="point `path:` to a git clone's folder"
            )
        if not is_git_repository(path):
            raise ConfigError(
                str(file),
                field,
                f"{path} is not a git repository",
                fix=f"run `git init` in {path} (or `git clone URL {path}`), or point `path:` to "
                "a git clone",
            )
