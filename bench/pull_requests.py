"""From a click to a pull request, and from red checks to a fix drafted.

The real Bolt app (HTTP mode) against our Slack emulator, its agents the real Claude Code CLI
against the scripted model, `git push` to a bare repository, and the loopback GitHub REST API
(`harness/testing/fake_github.py`), all in this process.

  click -> link:  a developer's result with changes; the time from the *Open pull request*
                  click reaching the bot to the thread's "is open" message at Slack (push,
                  the pull request opened on the API, the post).
  red -> fix:     the failing check run set on the API, then (a) a signed webhook delivery,
                  (b) polling only (`checkPollSeconds: 1`); the time from the API reporting
                  it to the fixing developer's notice in the thread (autoFixTries: 1).

Usage: .venv/bin/python bench/pull_requests.py [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import hmac
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from common import copy_project, serve_bot

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bot.pull_request_views import OPEN_PR_ACTION  # noqa: E402
from bot.server import BotServer  # noqa: E402
from bot.testing.slack_emulator import SlackEmulator  # noqa: E402
from harness.project import Project, build_orchestrator, load_project  # noqa: E402
from harness.runtime.claude import ClaudeRuntime  # noqa: E402
from harness.testing.fake_github import CheckRun, FakeGitHub  # noqa: E402
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn  # noqa: E402

SECRET = "bench-hook-secret"
FULL_NAME = "acme/web"
_CWD = re.compile(r"Primary working directory: (\S+)")


def git(folder: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def developer(request: ModelRequest) -> Turn:
    cwd = _CWD.search(request.system_text)
    assert cwd
    if not request.all_tool_results:
        name = f"f{request.index}.txt"
        return Turn.call("Write", file_path=f"{cwd.group(1)}/{name}", content="x\n")
    return Turn.finish("wrote a file", ["a file"])


def setup(tmp: Path, github: FakeGitHub) -> Path:
    remote = tmp / "remote.git"
    git(tmp, "init", "-q", "--bare", "-b", "main", str(remote))
    web = tmp / "web"
    web.mkdir()
    git(web, "init", "-q", "-b", "main")
    (web / "README.md").write_text("web\n", encoding="utf-8")
    git(web, "add", "-A")
    git(web, "-c", "user.email=d@example.com", "-c", "user.name=D", "commit", "-q", "-m", "s")
    git(web, "remote", "add", "origin", str(remote))
    git(web, "push", "-q", "origin", "main")
    github.add_token("ghp_bench", "harness-bot")
    github.add_repository(FULL_NAME, bare=remote)
    config = copy_project(tmp / "project")
    config.write_text(
        config.read_text(encoding="utf-8")
        + f"\nworkspaces:\n  default: web\n  repositories:\n    web:\n      path: {web}\n"
        f"      github: {{repository: {FULL_NAME}, apiUrl: '{github.api_url}'}}\n"
        "github:\n  autoFixTries: 1\n",
        encoding="utf-8",
    )
    return config


async def first_call(slack: SlackEmulator, since: int, needle: str, timeout: float) -> float:
    def found() -> float | None:
        for call in slack.calls("chat.postMessage")[since:]:
            if needle in json.dumps(call.params):
                return call.time
        return None

    return await slack.wait_for(found, timeout)


async def one_run(
    slack: SlackEmulator, github: FakeGitHub, server: BotServer, n: int, webhook: bool
) -> tuple[float, float]:
    channel = f"DP{n}"
    sent = await slack.user_message("U1", channel, f"add page {n}")
    ts = sent.event["ts"]
    await slack.wait_for(lambda: "white_check_mark" in slack.reactions(channel, ts), 120)
    result = next(m for m in reversed(slack.thread(channel, ts))
                  if OPEN_PR_ACTION in json.dumps(m.get("blocks") or []))  # fmt: skip
    orchestrator = server.bot.orchestrator
    slug = next(s.slug for s in await orchestrator.tasks.task_summaries() if s.thread
                and s.thread.channel == channel)  # fmt: skip
    posted = len(slack.calls("chat.postMessage"))
    clicked = time.time()  # the emulator stamps calls with time.time()
    await slack.block_action("U1", channel, result["ts"], OPEN_PR_ACTION, slug)
    linked = await first_call(slack, posted, "is open", 30)
    pull = (await orchestrator.tasks.task(slug)).pull_request
    assert pull is not None and pull.head_commit is not None
    posted = len(slack.calls("chat.postMessage"))
    github.set_check_runs(FULL_NAME, pull.head_commit, [CheckRun("tests", "completed", "failure")])
    reported = time.time()
    if webhook:
        body = json.dumps({"repository": {"full_name": FULL_NAME},
                           "check_run": {"head_sha": pull.head_commit}}).encode()  # fmt: skip
        signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        hook = server.url.replace("/slack/events", "/github/webhook")
        async with aiohttp.ClientSession() as session:
            headers = {"X-GitHub-Event": "check_run", "X-Hub-Signature-256": signature}
            async with session.post(hook, data=body, headers=headers) as answer:
                assert answer.status == 202
    drafted = await first_call(slack, posted, "Drafted a developer", 60)
    await slack.wait_for(lambda: "Pushed" in json.dumps(slack.thread(channel, ts)), 120)
    return linked - clicked, drafted - reported


async def measure(runs: int, *, webhook: bool) -> tuple[list[float], list[float]]:
    os.environ["GITHUB_TOKEN"] = "ghp_bench"
    os.environ["GITHUB_WEBHOOK_SECRET"] = SECRET
    with tempfile.TemporaryDirectory() as folder:
        async with (
            FakeGitHub() as github,
            SlackEmulator() as slack,
            ScriptedModel(developer) as model,
        ):
            project = load_project(setup(Path(folder), github))
            poll = 3600.0 if webhook else 1.0
            config = dataclasses.replace(
                project.config,
                github=dataclasses.replace(project.config.github, check_poll_seconds=poll),
            )
            orchestrator = build_orchestrator(
                Project(config=config, roles=project.roles), ClaudeRuntime(base_env=model.env())
            )
            server = await serve_bot(slack, orchestrator)
            try:
                samples = [await one_run(slack, github, server, n, webhook) for n in range(runs)]
            finally:
                await server.stop()
    return [a for a, _ in samples], [b for _, b in samples]


def line(name: str, samples: list[float]) -> str:
    return (f"{name:<34} median {statistics.median(samples) * 1000:7.0f} ms  "
            f"min {min(samples) * 1000:6.0f}  max {max(samples) * 1000:6.0f}")  # fmt: skip


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    clicks, hooked = await measure(args.runs, webhook=True)
    _, polled = await measure(args.runs, webhook=False)
    print(line("click -> PR link in the thread", clicks))
    print(line("red -> fix drafted (webhook)", hooked))
    print(line("red -> fix drafted (polling, 1 s)", polled))


if __name__ == "__main__":
    asyncio.run(main())
