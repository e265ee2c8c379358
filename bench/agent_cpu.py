"""CPU seconds per agent run on the scripted model, and what each part of it costs.

Agents run one after another through the real host, as `harness run` and the bot run them
(``build_orchestrator`` over the shipped config and roles: a new task each, its scratch
folder or, with ``--repository``, a worktree of a repository of 200 files, the real Claude
Code CLI in its sandbox), against the scripted model (one turn ending in a structured
result) in a process of its own, so that its CPU is not counted. Per run, user + system:

  claude        the CLI's own process (and the bridge's Python start, which it execs)
  CLI children  what the CLI starts itself (its git calls at start, tool commands)
  sandbox       bubblewrap, the launcher and the bridge's forwarding child
  git           the harness's own git calls (views, worktrees, commits)
  harness       this process: the orchestrator, the host, the SDK client, the egress proxy
  other         any other child of this process

Children are timed exactly: each direct child's rusage as it is reaped (``os.wait4``),
by what it runs. Within a sandbox, the CLI is told from bubblewrap and the bridge by
sampling /proc every 5 ms (the last few ms of the CLI then count as the sandbox's: see
"sampled" against "exact").

Then the bare CLI outside any sandbox or harness, against the same model: ``claude -p``
with ``--json-schema``, its HOME kept from run to run, and a fresh one each run (as the
sandbox gives it), alternating.

Usage: .venv/bin/python bench/agent_cpu.py [--runs 20] [--repository] [--bare-runs 10]
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from common import copy_project, model_process

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.project import build_orchestrator, load_project  # noqa: E402
from harness.runtime.claude import ClaudeRuntime  # noqa: E402
from harness.runtime.orphans import bundled_cli  # noqa: E402
from harness.tasks.model import RESULT_SCHEMA  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
KINDS = ("claude", "CLI children", "sandbox", "git", "harness", "other")


def cpu(usage: resource.struct_rusage) -> float:
    return usage.ru_utime + usage.ru_stime


class ChildTimes:
    """Each direct child's CPU (with all it reaped) as it is reaped, by kind: ``os.waitpid``
    becomes ``os.wait4`` and ``Popen`` remembers what each pid runs."""

    def __init__(self) -> None:
        self.by_kind: dict[str, float] = dict.fromkeys(KINDS, 0.0)
        self._argv: dict[int, list[str]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def kind(argv: list[str]) -> str:
        program = os.path.basename(argv[0]) if argv else ""
        if program == "git":
            return "git"
        if "harness-sandbox-" in argv[0] or "bwrap" in program:
            return "sandbox tree"
        if program.startswith("claude"):  # the CLI outside a sandbox, or its launcher
            return "bare CLI"
        return "other"

    @contextmanager
    def installed(self) -> Iterator[None]:
        real_waitpid, real_execute = os.waitpid, subprocess.Popen._execute_child  # type: ignore[attr-defined]

        def execute(popen: subprocess.Popen[Any], args: Any, *rest: Any) -> None:
            real_execute(popen, args, *rest)
            argv = [args] if isinstance(args, (str, bytes)) else list(args)
            with self._lock:
                self._argv[popen.pid] = [os.fsdecode(a) for a in argv]

        def waitpid(pid: int, options: int) -> tuple[int, int]:
            done, status, usage = os.wait4(pid, options)
            if done > 0:
                with self._lock:
                    kind = self.kind(self._argv.pop(done, []))
                    self.by_kind[kind] = self.by_kind.get(kind, 0.0) + cpu(usage)
            return done, status

        os.waitpid = waitpid
        subprocess.Popen._execute_child = execute  # type: ignore[attr-defined]
        stop = threading.Event()
        reaper = threading.Thread(target=self._reap_orphans, args=(stop,), daemon=True)
        reaper.start()
        try:
            yield
        finally:
            stop.set()
            reaper.join()
            os.waitpid = real_waitpid
            subprocess.Popen._execute_child = real_execute  # type: ignore[attr-defined]

    def _reap_orphans(self, stop: threading.Event) -> None:
        """As a subreaper, this process inherits what a child leaves running when it ends
        (an inner bubblewrap whose outer one has exited): each is reaped here, timed as the
        sandbox's. A child of its own it leaves to whoever waits for it."""
        while not stop.wait(0.005):
            try:
                found = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                continue
            if found is None:
                continue
            with self._lock:
                if found.si_pid in self._argv:
                    continue  # a Popen child: its own waiter reaps it
                try:
                    _, _, usage = os.wait4(found.si_pid, os.WNOHANG)
                except ChildProcessError:
                    continue
                self.by_kind["sandbox tree"] = self.by_kind.get("sandbox tree", 0.0) + cpu(usage)


class Sampler:
    """Every 5 ms, the CPU of each ``claude`` process below this one and of what it reaped,
    from /proc (the last value seen of each counts); its own CPU is left out of the harness's."""

    def __init__(self) -> None:
        self.claude: dict[tuple[int, int], tuple[float, float]] = {}
        self.own = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self._sample()
        self.own = cpu(resource.getrusage(resource.RUSAGE_THREAD))

    def _sample(self) -> None:
        todo = [os.getpid()]
        while todo:
            pid = todo.pop()
            try:
                with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as kids:
                    todo += [int(k) for k in kids.read().split()]
                with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as stat:
                    text = stat.read()
            except (OSError, ValueError):
                continue
            if text[text.index("(") + 1 : text.rindex(")")] != "claude" or not _is_cli(pid):
                continue  # not the CLI: the launcher script has its name too
            fields = text[text.rindex(")") + 2 :].split()
            own = (int(fields[11]) + int(fields[12])) / TICK  # utime, stime
            reaped = (int(fields[13]) + int(fields[14])) / TICK  # cutime, cstime
            self.claude[(pid, int(fields[19]))] = (own, reaped)  # by pid and start time

    def totals(self) -> tuple[float, float]:
        return sum(o for o, _ in self.claude.values()), sum(r for _, r in self.claude.values())


def _become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def _is_cli(pid: int) -> bool:
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe")) == "claude"
    except OSError:
        return False


async def harness_runs(base_url_env: dict[str, str], config: Path, runs: int) -> dict[str, float]:
    """CPU per run of each kind, over ``runs`` runs (after one not counted)."""
    orchestrator = build_orchestrator(load_project(config), ClaudeRuntime(base_env=base_url_env))
    first = await orchestrator.run("developer", "warm-up: not counted")
    assert first.status == "completed", first.error
    _become_subreaper()
    children = ChildTimes()
    with children.installed(), Sampler() as sampler:
        before = resource.getrusage(resource.RUSAGE_SELF)
        for n in range(runs):
            record = await orchestrator.run("developer", f"bench run {n}")
            assert record.status == "completed", record.error
        after = resource.getrusage(resource.RUSAGE_SELF)
    claude, cli_children = sampler.totals()
    tree = children.by_kind.pop("sandbox tree", 0.0)
    bare = children.by_kind.pop("bare CLI", 0.0)  # `sandbox: off`: exact, its children too
    parts = {
        "claude": bare - cli_children if bare else claude,
        "CLI children": cli_children,
        "sandbox": max(tree - claude - cli_children, 0.0) if tree else 0.0,
        "git": children.by_kind.get("git", 0.0),
        "harness": cpu(after) - cpu(before) - sampler.own,
        "other": children.by_kind.get("other", 0.0),
    }
    return {kind: value / runs for kind, value in parts.items()} | {
        "exact children": (tree + bare) / runs
    }


def bare_runs(env: dict[str, str], runs: int) -> dict[str, list[float]]:
    """CPU of ``claude -p`` alone, HOME kept or fresh, alternating. Blocking."""
    cli = bundled_cli()
    assert cli is not None, "the bundled CLI is missing"
    argv = [cli, "-p", "hello", "--output-format", "json"]
    argv += ["--json-schema", json.dumps(RESULT_SCHEMA)]
    samples: dict[str, list[float]] = {"kept HOME": [], "fresh HOME": []}
    with tempfile.TemporaryDirectory() as kept, tempfile.TemporaryDirectory() as work:
        one(argv, {**env, "HOME": kept}, work)  # the kept HOME's first start, not counted
        for n in range(runs):
            for name in ("kept HOME", "fresh HOME")[:: 1 if n % 2 == 0 else -1]:
                with tempfile.TemporaryDirectory() as fresh:
                    home = kept if name == "kept HOME" else fresh
                    samples[name].append(one(argv, {**env, "HOME": home}, work))
    return samples


def one(argv: list[str], env: dict[str, str], cwd: str) -> float:
    before = cpu(resource.getrusage(resource.RUSAGE_CHILDREN))
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and '"structured_output"' in done.stdout, done.stderr[-2000:]
    return cpu(resource.getrusage(resource.RUSAGE_CHILDREN)) - before


def report(parts: dict[str, float], label: str, print_: Callable[[str], None] = print) -> None:
    total = sum(parts[kind] for kind in KINDS)
    print_(f"{label}: {total:.3f} CPU-s per run")
    for kind in KINDS:
        print_(f"  {kind:<14} {parts[kind]:.3f} s  ({parts[kind] / total:.0%})")
    print_(f"  (children exact {parts['exact children']:.3f} s; sampled split within)")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--bare-runs", type=int, default=10)
    parser.add_argument("--repository", action="store_true", help="tasks in a git worktree")
    parser.add_argument("--sandbox-off", action="store_true", help="`sandbox: off` in config")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    with tempfile.TemporaryDirectory() as tmp, model_process() as model_env:
        config = copy_project(Path(tmp))
        if args.repository:
            add_repository(Path(tmp), config)
        if args.sandbox_off:
            # The shipped `sandbox:` section replaced: a key written twice is refused.
            text = config.read_text(encoding="utf-8")
            off = re.sub(r"(?m)^sandbox:\n(?:[ ].*\n|\n)*", "sandbox: off\n\n", text)
            config.write_text(off, encoding="utf-8")
        started = time.perf_counter()
        parts = await harness_runs(model_env, config, args.runs)
        took = time.perf_counter() - started
        report(parts, f"harness run, {args.runs} runs in {took:.1f} s")
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        if args.bare_runs:
            env = {"PATH": os.environ.get("PATH", ""), **model_env}
            bare = await asyncio.to_thread(bare_runs, env, args.bare_runs)
            for name, samples in bare.items():
                print(
                    f"bare `claude -p`, {name:<10} median {statistics.median(samples):.3f} "
                    f"CPU-s  min {min(samples):.3f}  max {max(samples):.3f}  (n={len(samples)})"
                )
            print(f"load average after: {os.getloadavg()[0]:.2f}")


def add_repository(folder: Path, config: Path) -> None:
    """A repository of 200 files, every new task's default: each gets a worktree."""
    repository = folder / "web"
    repository.mkdir()
    for n in range(200):
        (repository / f"module{n:03d}.py").write_text(f"VALUE = {n}\n", encoding="utf-8")
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.com"}
    env |= {"GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.com"}
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "start"]):
        subprocess.run(["git", *argv], cwd=repository, env=env, check=True)
    with config.open("a", encoding="utf-8") as file:
        file.write("\nworkspaces:\n  default: web\n  repositories:\n")
        file.write("    web: {path: web, baseBranch: main}\n")


if __name__ == "__main__":
    asyncio.run(main())
