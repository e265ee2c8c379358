"""``harness mcp`` over stdio as an MCP client starts it: ``python -m harness mcp --config
...`` as a subprocess, the local user's rights, its agents the real Claude Code CLI against a
scripted model in this process (reached through the environment, as a gateway would be)."""

from __future__ import annotations

import asyncio
import getpass
import sys
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from harness.project import Project, build_orchestrator
from harness.tasks.model import ThreadRef
from harness.testing.nats_server import NatsServer
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn
from harness.testing.workers import start_worker, worker_env
from tests.harness.mcp_server.conftest import call

pytestmark = pytest.mark.anyio

WAIT = 60.0


def script(request: ModelRequest) -> Turn:
    asked = request.first_user_text
    if "long job" in asked:
        return Turn(stall_seconds=60)
    if "push" in asked and not request.all_tool_results:
        return Turn.call("Bash", command="git push -h")
    return Turn.finish("done", issues=[r.text for r in request.all_tool_results])


def harness_mcp(project_dir: Path, model: ScriptedModel) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "harness", "mcp", "--config", str(project_dir / "config.yaml")],
        env=model.env(),
        cwd=project_dir,
    )


@pytest.mark.slow
async def test_over_stdio_tasks_start_finish_stop_and_ask_beside_another_harness(
    project: Project, project_dir: Path
) -> None:
    # Another harness process (the bot) made a task in the same store.
    bot = build_orchestrator(project)
    await bot.tasks.create_task(
        "from slack", ThreadRef("C0BOT", "1700000000.000100"), requester="U9"
    )
    await bot.shutdown()
    async with ScriptedModel(script) as model, Client(harness_mcp(project_dir, model)) as client:
        started = await call(client, "start_task", request="fix the login bug")
        result = await call(client, "await_agent", agentId=started["agentId"])
        assert (result["status"], result["result"]["summary"]) == ("completed", "done")

        listed = {t["description"]: t for t in (await call(client, "list_tasks"))["tasks"]}
        assert listed["fix the login bug"]["requester"] == getpass.getuser()
        assert listed["from slack"]["thread"] == {
            "channel": "C0BOT", "threadTs": "1700000000.000100"
        }  # fmt: skip

        long = await call(client, "start_task", request="a long job")
        assert (await call(client, "kill_agent", agentId=long["agentId"]))["success"]
        assert (await call(client, "await_agent", agentId=long["agentId"]))["status"] == "killed"

        pushing = await call(client, "start_task", request="push it")
        asked = asyncio.Event()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            if "waiting for approval" in (message or ""):
                asked.set()

        awaiting = asyncio.ensure_future(
            call(client, "await_agent", on_progress, agentId=pushing["agentId"])
        )
        await asyncio.wait_for(asked.wait(), WAIT)
        [question] = (await call(client, "list_questions"))["questions"]
        answered = await call(
            client, "answer_question", questionId=question["questionId"], answer="deny: not now"
        )
        assert answered["answer"] == "Deny: not now"
        pushed = await asyncio.wait_for(awaiting, WAIT)
        assert "not now" in pushed["result"]["issues"][0]


@pytest.mark.slow
async def test_with_runtime_nats_the_agents_run_on_a_worker(
    project_dir: Path, tmp_path: Path
) -> None:
    async with NatsServer(tmp_path / "nats") as nats, ScriptedModel(script) as model:
        config = project_dir / "config.yaml"
        with config.open("a", encoding="utf-8") as file:
            file.write(f"\nruntime: {{kind: nats, url: {nats.url}}}\n")
        worker = await start_worker("worker-a", nats.url, worker_env(model.env()), tmp_path)
        try:
            # No model access here: the worker has it, as on another machine.
            server = StdioServerParameters(
                command=sys.executable,
                args=["-m", "harness", "mcp", "--config", str(config)],
                cwd=project_dir,
            )
            async with Client(server) as client:
                started = await call(client, "start_task", request="fix the login bug")
                [listed] = (await call(client, "list_agents"))["agents"]
                assert listed["id"] == started["agentId"]
                result = await call(client, "await_agent", agentId=started["agentId"])
                assert (result["status"], result["result"]["summary"]) == ("completed", "done")
        finally:
            worker.terminate()
            await worker.wait()
