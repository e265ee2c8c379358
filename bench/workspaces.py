"""Preparing task workspaces in a repository of 5,000 committed files.

A repository of 5,000 files (50 folders of 100 files, about 1 KB each) is built and committed
first (not measured).

  sequential:  ``await workspaces.prepare(slug, "web")`` for 10 new tasks, one after another
  at once:     5 new tasks through ``asyncio.gather``, 3 rounds: each prepare's own latency
               and each round's wall time
  follow-up:   ``prepare`` of a task that has its worktree already, 10 times
  url:         10 new tasks of a `url` repository (a local bare repository through file://),
               one after another: each new task fetches the cache first
  changes:     ``changes()`` and ``patch()`` with 20 modified and 5 new files
  baseline:    plain ``git worktree add -b B PATH main`` as a subprocess, 10 times

Usage: .venv/bin/python bench/workspaces.py [--files 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import summary

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.config.settings import parse_config  # noqa: E402
from harness.workspaces.manager import Workspaces  # noqa: E402

ENV_CONFIG = "[user]\n\tname = Bench\n\temail = bench@example.com\n[commit]\n\tgpgsign = false\n"


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def build_repository(folder: Path, files: int) -> None:
    folder.mkdir()
    git(folder, "init", "--quiet", "--initial-branch=main")
    line = "the quick brown fox jumps over the lazy dog, again and again\n"
    for n in range(files):
        file = folder / f"pkg{n // 100:02d}" / f"module{n % 100:03d}.py"
        file.parent.mkdir(exist_ok=True)
        file.write_text(f"# file {n}\n" + line * 16, encoding="utf-8")
    git(folder, "add", "--all")
    git(folder, "commit", "--quiet", "-m", "5,000 files")


async def timed(workspaces: Workspaces, slug: str, repository: str) -> float:
    started = time.perf_counter()
    await workspaces.prepare(slug, repository)
    return time.perf_counter() - started


async def bench_sequential(workspaces: Workspaces) -> None:
    samples = [await timed(workspaces, f"seq-{n}", "web") for n in range(10)]
    print(summary("prepare, one after another", samples))
    again = [await timed(workspaces, f"seq-{n}", "web") for n in range(10)]
    print(summary("prepare, follow-up", again))


async def bench_at_once(workspaces: Workspaces) -> None:
    latencies: list[float] = []
    rounds: list[float] = []
    for round_ in range(3):
        started = time.perf_counter()
        latencies += await asyncio.gather(
            *(timed(workspaces, f"once-{round_}-{n}", "web") for n in range(5))
        )
        rounds.append(time.perf_counter() - started)
    print(summary("prepare, 5 at once (each)", latencies))
    print(summary("prepare, 5 at once (round)", rounds))


async def bench_url(workspaces: Workspaces) -> None:
    first = await timed(workspaces, "url-first", "api")
    print(f"{'prepare, url: clone + worktree':<30} {first:.3f} s  (once)")
    samples = [await timed(workspaces, f"url-{n}", "api") for n in range(10)]
    print(summary("prepare, url: fetch + worktree", samples))


async def bench_changes(workspaces: Workspaces) -> None:
    workspace = await workspaces.prepare("changes", "web")
    for n in range(20):
        file = workspace.path / "pkg07" / f"module{n:03d}.py"
        file.write_text(file.read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")
    for n in range(5):
        (workspace.path / f"new{n}.py").write_text("x = 1\n", encoding="utf-8")
    changes_samples, patch_samples = [], []
    for _ in range(5):
        started = time.perf_counter()
        changes = await workspaces.changes(workspace)
        changes_samples.append(time.perf_counter() - started)
        started = time.perf_counter()
        await workspaces.patch(workspace)
        patch_samples.append(time.perf_counter() - started)
    assert changes is not None and len(changes.files) == 25, changes
    print(summary("changes(), 25 files changed", changes_samples))
    print(summary("patch(), 25 files changed", patch_samples))


def bench_baseline(repo: Path, folder: Path) -> None:
    samples = []
    for n in range(10):
        started = time.perf_counter()
        git(repo, "worktree", "add", "--quiet", "-b", f"plain-{n}", str(folder / f"plain-{n}"))
        samples.append(time.perf_counter() - started)
    print(summary("git worktree add (baseline)", samples))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        gitconfig = root / "gitconfig"
        gitconfig.write_text(ENV_CONFIG, encoding="utf-8")
        os.environ.update(GIT_CONFIG_GLOBAL=str(gitconfig), GIT_CONFIG_NOSYSTEM="1")
        started = time.perf_counter()
        build_repository(root / "web", args.files)
        git(root, "clone", "--quiet", "--bare", str(root / "web"), str(root / "origin.git"))
        print(
            f"built a repository of {args.files} files "
            f"in {time.perf_counter() - started:.1f} s (not measured below)"
        )
        project = root / "project"
        project.mkdir()
        config = parse_config(
            {
                "workspaces": {
                    "repositories": {
                        "web": {"path": "../web"},
                        "api": {"url": (root / "origin.git").as_uri()},
                    }
                }
            },
            file=project / "config.yaml",
        )
        workspaces = Workspaces(config.workspaces)
        bench_baseline(root / "web", root / "plain")
        await bench_sequential(workspaces)
        await bench_at_once(workspaces)
        await bench_url(workspaces)
        await bench_changes(workspaces)


if __name__ == "__main__":
    asyncio.run(main())
