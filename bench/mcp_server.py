"""`harness mcp` over Streamable HTTP: the round trip of a tool call from an outside client.

  list:  list_tasks over 50 tasks (one with a finished agent), answered as JSON
  show:  show_task of the task with the finished agent (task.json in full)

The server is `harness mcp --transport http --port 0` in its own process (as people run it,
`--scripted` so it needs no model key), on the tasks another harness process made in its
store; the client is the mcp SDK's, with a bearer token, in this process. Each call is timed
from `call_tool` to its parsed result: 5 warm-up calls, then 50.

Usage: .venv/bin/python bench/mcp_server.py
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import httpx2  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from harness.cli.scaffold import DEFAULTS  # noqa: E402
from harness.project import build_orchestrator, load_project  # noqa: E402
from harness.runtime.claude import ClaudeRuntime  # noqa: E402
from harness.testing.scripted_model import ScriptedModel, Turn  # noqa: E402

TASKS = 50
CALLS = 50
WARMUP = 5
TOKEN = "bench-token-0123456789abcdef"


def make_project(root: Path) -> Path:
    config = (DEFAULTS / "config.yaml").read_text(encoding="utf-8")
    config += "\nmcpServer: {tokens: [{user: U0BENCH, tokenEnv: BENCH_MCP_TOKEN}]}\n"
    (root / "config.yaml").write_text(config, encoding="utf-8")
    shutil.copytree(DEFAULTS / "roles", root / "roles")
    return root / "config.yaml"


async def fill_store(config: Path) -> str:
    """The tasks another harness process (a bot) made: one with a finished agent."""
    async with ScriptedModel(lambda request: Turn.finish("done", changes=["a.py"])) as model:
        orchestrator = build_orchestrator(load_project(config), ClaudeRuntime(base_env=model.env()))
        for n in range(TASKS - 1):
            await orchestrator.tasks.create_task(f"bench task {n}", requester="U0BENCH")
        record = await orchestrator.run("developer", "the task to show", requested_by="U0BENCH")
        await orchestrator.shutdown()
    task = next(t for t in await orchestrator.tasks.task_summaries() if t.dispatch_count)
    assert record.status == "completed", record.error
    return task.slug


async def time_calls(client: Client, tool: str, args: dict[str, Any]) -> list[float]:
    samples = []
    for n in range(WARMUP + CALLS):
        started = time.perf_counter()
        result = await client.call_tool(tool, args)
        json.loads(result.content[0].text)  # type: ignore[union-attr]
        elapsed = (time.perf_counter() - started) * 1000
        assert not result.is_error, result
        if n >= WARMUP:
            samples.append(elapsed)
    return samples


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        config = make_project(Path(folder))
        slug = await fill_store(config)
        server = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "harness", "mcp", "--config", str(config), "--scripted"),
            *("--transport", "http", "--port", "0"),
            env={**os.environ, "BENCH_MCP_TOKEN": TOKEN},
            stderr=asyncio.subprocess.PIPE,
        )
        assert server.stderr is not None
        try:
            line = b""
            while b"serving http" not in line:
                line = await asyncio.wait_for(server.stderr.readline(), 30)
                assert line, "harness mcp exited before serving"
            url = line.decode().split("serving ", 1)[1].split()[0]
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30)) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                listed = await time_calls(client, "list_tasks", {})
                shown = await time_calls(client, "show_task", {"taskSlug": slug})
        finally:
            server.terminate()
            await server.wait()
    print(f"harness mcp over Streamable HTTP on loopback, {TASKS} tasks, {CALLS} calls each")
    print("| call | median | min | max |")
    print("|---|---|---|---|")
    for name, samples in (("list_tasks", listed), ("show_task", shown)):
        print(
            f"| `{name}` round trip | {statistics.median(samples):.1f} ms | "
            f"{min(samples):.1f} | {max(samples):.1f} |"
        )


if __name__ == "__main__":
    asyncio.run(main())
