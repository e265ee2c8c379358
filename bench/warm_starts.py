"""Warm starts: from a DM's Slack event to its agent's first request to the model.

The real Bolt app (HTTP mode) against our Slack emulator, its agents the real Claude Code CLI
(in the OS sandbox) against the scripted model, in this process; the time from the moment
the event is sent to the bot to the model receiving the agent's first request.

  cold:          no spares (`spares: {}`), one DM at a time
  warm:          one spare of the default role, one DM at a time (its replacement is made
                 between DMs)
  warm burst:    ten spares, ten DMs at once
  follow-up:     a reply in a thread whose agent completed, served by its task's spare
  repository:    cold and warm again, the task's workspace a worktree of a repository of
                 2,000 files (the warm one made ahead on a placeholder branch)
  bare query():  a bare `claude_agent_sdk.query()` from its start to its first request
  CLI floor:     a warm CLI from `query()` to its first request (what no spare can save)
  memory:        the resident memory of the bot process and of its spares' processes, idle

  --breakdown:   the warm rows only, with the median time from the event to each step of
                 the harness's path to the prompt (the bot's task, the dispatch's records, the
                 spare taken and its folder adopted, the prompt handed to the CLI)
  --compare:     the warm rows (scratch, repository) with spares that wait unprimed and
                 primed (their CLI's context worked out and a priming turn run ahead, its
                 model calls answered by the sandbox's proxy), alternating rows, twice; each
                 row says the branch its first requests' git status names; then bare query()
  --burst N:     N bursts of ten DMs on ten spares, unprimed and primed alternating

Usage: .venv/bin/python bench/warm_starts.py [--runs 10] [--breakdown | --compare | --burst N]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from common import bare_query, copy_project, serve_bot
from workspaces import ENV_CONFIG, build_repository

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bot.testing.slack_emulator import SlackEmulator  # noqa: E402
from harness.cli.offline import scripted_env  # noqa: E402
from harness.project import Project, build_orchestrator, load_project  # noqa: E402
from harness.runtime.claude import ClaudeRuntime  # noqa: E402
from harness.runtime.host import AgentHost  # noqa: E402
from harness.runtime.spec import (  # noqa: E402
    AgentControl,
    AgentSpec,
    Approval,
    RunIO,
    ToolReply,
    ToolUse,
)
from harness.testing.processes import claude_children  # noqa: E402
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn  # noqa: E402
from harness.workspaces.manager import Workspaces  # noqa: E402

# (step, time.time()) of the DM being measured, when --breakdown asks for them.
MARKS: list[tuple[str, float]] = []


def mark_steps() -> None:
    """Wraps the steps of the warm path so each call notes when it began and ended."""
    from claude_agent_sdk import ClaudeSDKClient

    from bot.conversations import Conversations
    from harness.agents.dispatching import Dispatcher
    from harness.agents.task_desk import TaskDesk
    from harness.runtime.spares import SparePool
    from harness.tasks.files import FileTaskStore
    from harness.workspaces.sandbox_folders import SandboxFolders

    steps = [
        (Conversations, "_start", "bot: new task"),
        (TaskDesk, "create_task", "task created"),
        (Dispatcher, "draft", "draft"),
        (FileTaskStore, "save_dispatch", "dispatch written"),
        (AgentHost, "run", "host.run"),
        (SparePool, "take", "spare taken"),
        (SandboxFolders, "adopt_spare", "folder adopted"),
        (ClaudeSDKClient, "query", "prompt to the CLI"),
    ]
    for owner, name, label in steps:
        original = getattr(owner, name)

        def wrapped(*args: Any, __original: Any = original, __label: str = label,
                    **kwargs: Any) -> Any:  # fmt: skip
            async def run() -> Any:
                MARKS.append((f"{__label} (in)", time.time()))
                try:
                    return await __original(*args, **kwargs)
                finally:
                    MARKS.append((f"{__label} (out)", time.time()))

            return run()

        setattr(owner, name, wrapped)
    import harness.workspaces.repos as repos
    import harness.workspaces.spare_moves as spare_moves

    # The workspaces' git runs in their operations' threads (``git_now``).
    for module in (repos, spare_moves):
        original_git = module.git_now

        def marked_git(*args: str, __git: Any = original_git, **kwargs: Any) -> Any:
            MARKS.append((f"git {args[0]} (in)", time.time()))
            try:
                return __git(*args, **kwargs)
            finally:
                MARKS.append((f"git {args[0]} (out)", time.time()))

        module.git_now = marked_git  # type: ignore[assignment]


def breakdown_lines(samples: list[list[tuple[str, float]]]) -> list[str]:
    """The median time of each step's n-th occurrence from the event, in order."""
    by_step: dict[str, list[float]] = {}
    order: list[str] = []
    for marks in samples:
        seen: dict[str, int] = {}
        for step, at in marks:
            seen[step] = seen.get(step, 0) + 1
            key = f"{step} #{seen[step]}" if seen[step] > 1 else step
            if key not in by_step:
                by_step[key] = []
                order.append(key)
            by_step[key].append(at)
    lines = []
    for key in sorted(order, key=lambda k: statistics.median(by_step[k])):
        lines.append(f"    {key:<34} {statistics.median(by_step[key]) * 1000:6.1f} ms")
    return lines


def ended(slack: SlackEmulator, channel: str, ts: str) -> bool:
    """Whether the DM's agent has ended (the bot marks the message done)."""
    return "white_check_mark" in slack.reactions(channel, ts)


def script(request: ModelRequest) -> Turn:
    return Turn.finish("done")


def rss_mb(pid: int) -> float:
    """The resident memory of ``pid`` and its descendants, in MB."""
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        try:
            with open(f"/proc/{current}/status", encoding="utf-8") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
            with open(f"/proc/{current}/task/{current}/children", encoding="utf-8") as kids:
                todo += [int(k) for k in kids.read().split()]
        except OSError:
            continue
    return total / 1024


def first_request_after(model: ScriptedModel, sent: float, tag: str) -> float | None:
    for request in model.main_requests:
        if tag in request.first_user_text:
            return request.received_at - sent
    return None


def branches(model: ScriptedModel, tag: str) -> set[str]:
    """The branch named by the git status in the first request of each DM tagged ``tag``."""
    named = set()
    for request in model.main_requests:
        text = json.dumps(request.body["messages"][0])
        if tag in request.first_user_text and "Current branch: " in text:
            named.add(text.split("Current branch: ", 1)[1].split("\\n", 1)[0])
    return named


async def measure(
    project: Project,
    model: ScriptedModel,
    spares: int,
    dms: int,
    *,
    burst: bool,
    label: str = "",
    steps: list[list[tuple[str, float]]] | None = None,
    prime: bool = True,
) -> tuple[list[float], float | None]:
    # A burst of ten runs at once: the concurrency cap must not queue it.
    mcp = dataclasses.replace(project.config.mcp, max_concurrent_agents=10)
    # Ten spares at once: above the shipped caps on idle spares and their memory.
    config = dataclasses.replace(
        project.config,
        spares={"developer": spares},
        follow_up_spares=0,
        mcp=mcp,
        spares_max_idle=max(spares, project.config.spares_max_idle),
        spares_max_memory_mb=max(spares * 300, project.config.spares_max_memory_mb),
    )
    runtime = ClaudeRuntime(base_env=scripted_env(model.env()), prime_spares=prime)
    host = AgentHost(runtime, Workspaces(config.workspaces))
    orchestrator = build_orchestrator(dataclasses.replace(project, config=config), host)
    samples: list[float] = []
    memory = None
    async with SlackEmulator() as slack:
        server = await serve_bot(slack, orchestrator)
        try:
            if spares and host.spares is not None:
                await host.spares.wait_ready(spares, 180)
                memory = sum(rss_mb(p) for p in claude_children())
            tag = f"{label}s{spares}{'b' if burst else ''}"
            asked: list[tuple[str, str]] = []

            async def one(n: int) -> None:
                text = f"write {tag}-{n}"
                MARKS.clear()
                sent = time.time()  # the scripted model stamps requests with time.time()
                posted = await slack.user_message("U1", f"D{tag}{n}", text)
                asked.append((f"D{tag}{n}", posted.event["ts"]))
                got = await slack.wait_for(lambda: first_request_after(model, sent, text), 60)
                samples.append(got)
                if steps is not None:
                    steps.append([(s, at - sent) for s, at in MARKS if at - sent <= got])
                    steps[-1].append(("first request", got))

            if burst:
                await asyncio.gather(*(one(n) for n in range(dms)))
                # Each run to its end: the bot's stop would otherwise kill them mid-run.
                for channel, ts in asked:
                    await slack.wait_for(lambda c=channel, t=ts: ended(slack, c, t), 120)
            else:
                for n in range(dms):
                    if spares and host.spares is not None:
                        await host.spares.wait_ready(spares, 60)
                    await one(n)
        finally:
            await server.stop()
    return samples, memory


async def follow_ups(project: Project, model: ScriptedModel, runs: int) -> list[float]:
    """A follow-up in a thread whose agent completed: its task's follow-up spare serves it."""
    config = dataclasses.replace(project.config, spares={}, follow_up_spares=1)
    runtime = ClaudeRuntime(base_env=scripted_env(model.env()))
    host = AgentHost(runtime, Workspaces(config.workspaces))
    orchestrator = build_orchestrator(dataclasses.replace(project, config=config), host)
    assert host.follow_ups is not None
    spares = host.follow_ups

    async def one(slack: SlackEmulator, n: int) -> float:
        channel = f"DF{n}"
        # The previous thread's next spare started first: one spare at a time, and one still
        # starting as this task's agent completes would leave this task none.
        await spares.settled(60)
        ts = (await slack.user_message("U1", channel, f"write f{n}")).event["ts"]
        await slack.wait_for(lambda: "white_check_mark" in slack.reactions(channel, ts), 60)
        [slug] = [t.slug for t in await orchestrator.tasks.task_summaries()
                  if t.thread is not None and t.thread.channel == channel]  # fmt: skip
        await spares.wait_for(slug, 60)
        text = f"and more f{n}"
        sent = time.time()
        await slack.user_message("U1", channel, text, thread_ts=ts)
        return await slack.wait_for(lambda: first_request_after(model, sent, text), 60)

    async with SlackEmulator() as slack:
        server = await serve_bot(slack, orchestrator)
        try:
            return [await one(slack, n) for n in range(runs)]
        finally:
            await server.stop()


async def floor(project: Project, model: ScriptedModel, runs: int) -> list[float]:
    """From a warm CLI's query() to its first request: what the CLI itself takes."""
    runtime = ClaudeRuntime(base_env=scripted_env(model.env()))
    workspaces = Workspaces(project.config.workspaces)
    role = project.roles["developer"]
    samples = []
    for n in range(runs):
        folder = await workspaces.sandbox_folders.spare_folder()
        template = AgentSpec(agent_id="spare", role=role, prompt="", cwd=str(folder))
        warm = await runtime.warm(template)
        text = f"floor {n}"
        spec = dataclasses.replace(template, agent_id=f"a{n:010d}", prompt=text)
        io = RunIO(NoTools(), lambda _m: None, nothing, lambda _cwd: None)
        started = time.time()
        await runtime.run_warm(warm, spec, AgentControl(), io)
        got = first_request_after(model, started, text)
        assert got is not None
        samples.append(got)
    return samples


class NoTools:
    async def call(self, agent_id: str, tool: str, args: Mapping[str, Any]) -> ToolReply:
        return ToolReply({}, is_error=True)

    async def approve(self, agent_id: str, tool: str, args: Mapping[str, Any]) -> Approval:
        return Approval(False, "no")


async def nothing(_use: ToolUse) -> None:
    return None


async def bare(model: ScriptedModel, runs: int) -> list[float]:
    samples = []
    for n in range(runs):
        text = f"bare {n}"
        started = time.time()
        await bare_query(scripted_env(model.env()), text)
        got = first_request_after(model, started, text)
        assert got is not None
        samples.append(got)
    return samples


def line(name: str, samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return (f"{name:<32} p50 {statistics.median(samples) * 1000:6.0f} ms  p99 {p99 * 1000:6.0f}"
            f"  min {min(samples) * 1000:5.0f}  max {max(samples) * 1000:5.0f}")  # fmt: skip


def with_repository(folder: Path, files: int) -> Path:
    """A project whose tasks get worktrees of a repository of ``files`` files; its config."""
    folder.mkdir()
    gitconfig = folder / "gitconfig"
    gitconfig.write_text(ENV_CONFIG, encoding="utf-8")
    os.environ.update(GIT_CONFIG_GLOBAL=str(gitconfig), GIT_CONFIG_NOSYSTEM="1")
    build_repository(folder / "web", files)
    (folder / "project").mkdir()
    config = copy_project(folder / "project")
    with config.open("a", encoding="utf-8") as out:
        out.write(f"\nworkspaces:\n  repositories:\n    web: {{path: {folder / 'web'}}}\n")
    return config


def load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


async def compare(
    project: Project, in_repository: Project, model: ScriptedModel, runs: int
) -> None:
    """Warm rows with unprimed and primed spares, alternating, twice; then bare query()."""
    tallies: dict[str, list[float]] = {}
    for round_ in range(2):
        for name, chosen in (("scratch", project), ("repository", in_repository)):
            for prime in (False, True):
                row = f"{name}: warm, {'primed' if prime else 'unprimed'}"
                tag = f"{name[0]}{int(prime)}{round_}"
                got, _ = await measure(chosen, model, 1, runs, burst=False, label=tag, prime=prime)
                tallies.setdefault(row, []).extend(got)
                named = ", ".join(sorted(branches(model, f"write {tag}")))
                print(line(row, got) + f"  ({load()}; branch: {named})", flush=True)
    for row, got in tallies.items():
        print(line(f"all: {row}", got), flush=True)
    print(line("bare query() start", await bare(model, runs)) + f"  ({load()})", flush=True)


async def bursts(project: Project, model: ScriptedModel, rounds: int) -> None:
    """Bursts of ten DMs on ten spares, unprimed and primed alternating."""
    tallies: dict[bool, list[float]] = {False: [], True: []}
    for round_ in range(rounds):
        for prime in (False, True):
            label = f"{'p' if prime else 'u'}{round_}"
            got, _ = await measure(project, model, 10, 10, burst=True, label=label, prime=prime)
            tallies[prime].extend(got)
            name = f"burst of 10, {'primed' if prime else 'unprimed'}"
            print(line(name, got) + f"  ({load()})", flush=True)
    for prime, got in tallies.items():
        print(line(f"all bursts, {'primed' if prime else 'unprimed'}", got), flush=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--only-repository", action="store_true")
    parser.add_argument("--breakdown", action="store_true")
    parser.add_argument("--compare", action="store_true")
    parser.add_argument("--burst", type=int, default=0, metavar="N")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        project = load_project(copy_project(Path(folder)))
        in_repository = load_project(with_repository(Path(folder) / "repository", 2000))
        async with ScriptedModel(script) as model:
            if args.compare:
                await compare(project, in_repository, model, args.runs)
                return
            if args.burst:
                await bursts(project, model, args.burst)
                return
            if args.breakdown:
                mark_steps()
                for name, chosen in (("repository", in_repository), ("scratch", project)):
                    steps: list[list[tuple[str, float]]] = []
                    warm, _ = await measure(chosen, model, 1, args.runs, burst=False,
                                            label=name[0], steps=steps)  # fmt: skip
                    print(line(f"{name}: warm (1 spare)", warm), flush=True)
                    print("\n".join(breakdown_lines(steps)), flush=True)
                return
            cold, _ = await measure(in_repository, model, 0, args.runs, burst=False, label="r")
            print(line("repository: cold (no spares)", cold), flush=True)
            warm, _ = await measure(in_repository, model, 1, args.runs, burst=False, label="r")
            print(line("repository: warm (1 spare)", warm), flush=True)
            if args.only_repository:
                return
            cold, _ = await measure(project, model, 0, args.runs, burst=False)
            print(line("cold (no spares)", cold), flush=True)
            warm, memory = await measure(project, model, 1, args.runs, burst=False)
            print(line("warm (1 spare)", warm), flush=True)
            burst, burst_memory = await measure(project, model, 10, 10, burst=True)
            print(line("warm burst of 10 (10 spares)", burst), flush=True)
            followed = await follow_ups(project, model, args.runs)
            print(line("warm follow-up (its task's spare)", followed), flush=True)
            print(line("bare query() start", await bare(model, args.runs)), flush=True)
            print(line("warm CLI: query() -> request", await floor(project, model, 5)), flush=True)
    print(f"bot process: {rss_mb(os.getpid()):.0f} MB resident (with the emulator and model)")
    print(f"idle spares: 1 = {memory or 0:.0f} MB, 10 = {burst_memory or 0:.0f} MB")


if __name__ == "__main__":
    asyncio.run(main())
