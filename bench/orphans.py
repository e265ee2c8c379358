"""How long an agent's ``claude`` process outlives a SIGKILLed harness, and what it does meanwhile.

A harness process (the orchestrator in a child Python process, as `harness run` builds it)
runs one developer agent with the real Claude Code CLI against the scripted model; once the
agent is mid-turn the harness gets SIGKILL, and the CLI child is watched (/proc, polled every
millisecond) until it is gone, up to a cap.

  sandboxed:  the shipped config: the CLI in the OS sandbox, whose bubblewrap dies with the
              harness (`--die-with-parent`) and takes the CLI along
  guarded:    outside the sandbox (`sandbox: enabled: false`), the CLI started through the
              parent-death launcher (the default there)
  unguarded:  outside the sandbox, ClaudeRuntime(guard_children=False): the bare CLI, as
              before the guard
  sweep:      what the unguarded run left is killed by the next start's recovery
              (Orchestrator.recover_interrupted: the /proc scan for HARNESS_RUN_ID)

Two agents: one whose model turn hangs (stalls 60 s), and a busy one whose every turn takes
1 s and calls Glob, so an orphan would keep calling the model.

Usage: .venv/bin/python bench/orphans.py [--runs 10] [--cap 15]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import copy_project, summary

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.project import build_orchestrator, load_project  # noqa: E402
from harness.testing.processes import claude_children  # noqa: E402
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn  # noqa: E402

DRIVER = """
import asyncio, sys
from pathlib import Path
from harness.project import build_orchestrator, load_project
from harness.runtime.claude import ClaudeRuntime

async def main():
    runtime = ClaudeRuntime(guard_children=sys.argv[2] == "guarded")
    orchestrator = build_orchestrator(load_project(Path(sys.argv[1])), runtime)
    await orchestrator.recover_interrupted()
    await orchestrator.run("developer", sys.argv[3])

asyncio.run(main())
"""


def script(request: ModelRequest) -> Turn:
    if "busy" in request.first_user_text:
        return Turn(tool_calls=Turn.call("Glob", pattern="*").tool_calls, stall_seconds=1.0)
    return Turn(stall_seconds=60)


def gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat[stat.rindex(")") + 2] in "ZX"


def kill_mid_turn(
    model: ScriptedModel, config: Path, mode: str, prompt: str, cap: float
) -> tuple[float | None, int, int]:
    """(seconds the CLI outlived the harness, None past ``cap``; model requests it made
    after the kill; its pid)."""
    before = len(model.requests)
    harness = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(config), mode, prompt],
        env={**os.environ, **model.env()},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
    )
    try:
        model.wait_for_request_sync(after=before, timeout=30)
        [claude] = claude_children(harness.pid)
        requests = len(model.requests)
        harness.send_signal(signal.SIGKILL)
        killed = time.perf_counter()
        harness.wait()
    finally:
        harness.kill()
        harness.wait()
    lived: float | None = None
    while time.perf_counter() - killed < cap:
        if gone(claude):
            lived = time.perf_counter() - killed
            break
        time.sleep(0.001)  # polling is fine in a bench, never in a test
    return lived, len(model.requests) - requests, claude


async def sweep(config: Path, leftover: int, cap: float) -> tuple[float, float]:
    """(seconds for the next start's recovery, seconds until the leftover was gone)."""
    orchestrator = build_orchestrator(load_project(config))
    started = time.perf_counter()
    await orchestrator.recover_interrupted()
    recovered = time.perf_counter() - started
    while not gone(leftover) and time.perf_counter() - started < cap:
        await asyncio.sleep(0.001)
    gone_after = time.perf_counter() - started
    await orchestrator.shutdown()
    return recovered, gone_after


def describe(name: str, lived: list[float | None], after: list[int], cap: float) -> None:
    ended = [s for s in lived if s is not None]
    if ended:
        print(summary(f"{name}: CLI gone after", ended))
    if len(ended) < len(lived):
        print(f"{name}: {len(lived) - len(ended)} of {len(lived)} CLIs still alive after {cap} s")
    print(f"{name}: model requests after the kill: {after}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--cap", type=float, default=15.0, help="seconds to watch an orphan")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ScriptedModel.in_thread(script) as model:
        sandboxed = copy_project(Path(tmp, "sandboxed"))
        config = copy_project(Path(tmp, "outside"))
        shipped = config.read_text(encoding="utf-8")
        outside = shipped.replace("\nsandbox:\n", "\nsandbox:\n  enabled: false\n")
        assert outside != shipped, "the shipped config.yaml has no sandbox: section"
        config.write_text(outside, encoding="utf-8")
        for name, project in (("sandboxed", sandboxed), ("guarded", config)):
            for prompt in ("a hanging job", "a busy job"):
                lived: list[float | None] = []
                after: list[int] = []
                for _ in range(args.runs):
                    s, n, _pid = await asyncio.to_thread(
                        kill_mid_turn, model, project, "guarded", prompt, args.cap
                    )
                    lived.append(s)
                    after.append(n)
                describe(f"{name}, {prompt}", lived, after, args.cap)

        runs = max(1, args.runs // 3)
        lived, after, sweeps, cleared = [], [], [], []
        for _ in range(runs):
            s, n, pid = await asyncio.to_thread(
                kill_mid_turn, model, config, "unguarded", "a busy job", args.cap
            )
            lived.append(s)
            after.append(n)
            if s is None:  # still there: the next start's sweep must end it
                recovered, gone_after = await sweep(config, pid, args.cap)
                sweeps.append(recovered)
                cleared.append(gone_after)
        describe("unguarded, a busy job", lived, after, args.cap)
        if sweeps:
            print(summary("next start: recovery + sweep", sweeps))
            print(summary("next start: orphan gone after", cleared))


if __name__ == "__main__":
    asyncio.run(main())
