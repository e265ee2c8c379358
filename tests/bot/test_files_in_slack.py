"""Files in a request and files shared back, as a Slack user sees them: the real Bolt app
against the emulator, which serves the files to the bot's token only; agents held by
HeldRuntime (what they were given is in their spec and their folder)."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.surfaces import SHORTCUT
from bot.testing.slack_emulator import SlackEmulator
from harness.config.settings import FileLimits, SlackSettings
from harness.errors import ToolError
from harness.runtime.spec import AgentSpec
from harness.testing.held_runtime import HeldRuntime
from harness.tools.file_handlers import ShareFileInput, share_file
from harness.tools.gateway import HarnessTools
from harness.tools.registry import Caller
from tests.bot.conftest import BOT_TOKEN, Rig, RigFactory

pytestmark = pytest.mark.anyio

WAIT = 10.0  # nothing here starts a process
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
LOG = b"2026-11-26 07:00:01 ERROR db: connection refused\n\xe2\x9c\x93 retried\n"


def limits(max_bytes: int = 10_000, max_count: int = 10) -> SlackSettings:
    return SlackSettings(files=FileLimits(max_bytes=max_bytes, max_count=max_count))


async def send(r: Rig, text: str, files: list[dict[str, Any]], **kw: Any) -> str:
    sent = await r.slack.user_message("U1", kw.pop("channel", "D1"), text, files=files, **kw)
    return str(sent.event["ts"])


async def agent(r: Rig, index: int = 0) -> AgentSpec:
    await r.held.wait_started(index + 1, WAIT)
    return r.held.started[index]


def attached(spec: AgentSpec, name: str) -> bytes:
    return (Path(spec.cwd) / ".attachments" / name).read_bytes()


async def test_an_image_and_a_log_reach_the_agent_as_an_image_and_a_file(rig: RigFactory) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        image = r.slack.user_file("U1", "screen shot.png", PNG)
        log = r.slack.user_file("U1", "app.log", LOG, mimetype="text/plain")
        ts = await send(r, "why does the app fail?", [image, log])
        spec = await agent(r)
        assert [(a.name, a.media_type) for a in spec.attachments] == [
            ("screen_shot.png", "image/png"),
            ("app.log", "text/plain"),
        ]
        assert spec.attachments[0].content() == PNG
        assert "why does the app fail?" in spec.prompt
        assert f".attachments/app.log ({len(LOG)} B)" in spec.prompt
        assert ".attachments/screen_shot.png (70 B, shown to you above)" in spec.prompt
        assert attached(spec, "app.log") == LOG  # exact bytes, in the agent's folder
        assert attached(spec, "screen_shot.png") == PNG
        r.held.release()
        assert await r.final_reaction("D1", ts, WAIT) == "white_check_mark"
        assert "left out" not in r.bot_text("D1", ts)
    # Each download carried the bot's token.
    assert r.slack.shared_files.downloads(log["id"]) == [f"Bearer {BOT_TOKEN}"]


async def test_a_file_over_the_limit_is_left_out_and_the_rest_runs(rig: RigFactory) -> None:
    async with rig(runtime=HeldRuntime(), slack_settings=limits(max_bytes=100)) as r:
        big = r.slack.user_file("U1", "big.log", b"x" * 5000)
        # Slack says it is small; its bytes are not: they are cut off at the limit.
        liar = r.slack.user_file("U1", "liar.log", b"y" * 500, size=10)
        small = r.slack.user_file("U1", "small.log", LOG)
        ts = await send(r, "look at these", [big, liar, small])
        spec = await agent(r)
        assert [a.name for a in spec.attachments] == ["small.log"]
        assert "Left out (you do not have them): big.log (5 KB, over the 100 B limit" in (
            spec.prompt
        )
        said = await r.slack.wait_for(lambda: "left out" in r.bot_text("D1", ts), WAIT)
        assert said
        shown = r.bot_text("D1", ts)
        assert "`big.log`: 5 KB, over the 100 B limit (`slack.files.maxBytes`" in shown
        assert "`liar.log`: over the 100 B limit" in shown
        assert "went ahead with the rest" in shown
    assert r.slack.shared_files.downloads(big["id"]) == []  # never fetched


async def test_files_past_the_count_are_left_out(rig: RigFactory) -> None:
    async with rig(runtime=HeldRuntime(), slack_settings=limits(max_count=2)) as r:
        files = [r.slack.user_file("U1", f"{n}.txt", f"file {n}\n".encode()) for n in range(3)]
        ts = await send(r, "compare these", files)
        spec = await agent(r)
        assert [a.name for a in spec.attachments] == ["0.txt", "1.txt"]
        await r.slack.wait_for(lambda: "`2.txt`" in r.bot_text("D1", ts), WAIT)
        assert "a message may attach 2 file(s) (`slack.files.maxCount`" in r.bot_text("D1", ts)


async def test_files_the_bot_cannot_read_are_said_and_the_request_runs(rig: RigFactory) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        hidden = r.slack.user_file(
            "U1", "secret.txt", b"s", refuse="not_in_channel", with_url=False
        )
        forbidden = r.slack.user_file("U1", "locked.txt", b"l", refuse="access_denied")
        deleted = r.slack.user_file("U1", "gone.txt", b"g", with_url=False)
        deleted["id"] = "FNOSUCHFILE"
        binary = r.slack.user_file(
            "U1", "report.pdf", b"%PDF-1.7\n\x00\x01", mimetype="application/pdf"
        )
        ts = await send(r, "use these", [hidden, forbidden, deleted, binary])
        spec = await agent(r)
        assert spec.attachments == ()
        assert "use these" in spec.prompt
        await r.slack.wait_for(lambda: "left out" in r.bot_text("D1", ts), WAIT)
        shown = r.bot_text("D1", ts)
        assert "`secret.txt`: I cannot read it: I am not in the channel it was shared in" in shown
        assert "`locked.txt`: I cannot read it: Slack refused (HTTP 403)" in shown
        assert "files:read" in shown
        assert "`gone.txt`: I cannot read it: Slack says it does not exist any more" in shown
        assert "`report.pdf`: not an image (PNG, JPEG, GIF, WebP) or a UTF-8 text file" in shown
        assert "went ahead with your message without them" in shown
        assert r.slack.calls("files.info")  # the files without a link were asked about


async def test_a_message_of_files_alone_asks_the_agent_to_look_at_them(rig: RigFactory) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        await send(r, "", [r.slack.user_file("U1", "trace.txt", b"Traceback ...\n")])
        spec = await agent(r)
        assert "## Your Assignment\n\nLook at the attached files." in spec.prompt
        assert attached(spec, "trace.txt") == b"Traceback ...\n"


async def test_a_follow_up_with_a_file_reaches_the_next_agent(rig: RigFactory) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        ts = await send(r, "fix the crash", [])
        await agent(r)
        r.held.release()
        assert await r.final_reaction("D1", ts, WAIT) == "white_check_mark"
        log = r.slack.user_file("U1", "crash.log", LOG)
        await send(r, "here is the log", [log], thread_ts=ts)
        spec = await agent(r, 1)
        assert [a.name for a in spec.attachments] == ["crash.log"]
        assert ".attachments/crash.log" in spec.prompt
        assert attached(spec, "crash.log") == LOG


async def test_a_forwarded_messages_files_come_along(rig: RigFactory) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        log = r.slack.user_file("U2", "their.log", LOG)
        forwarded = {"is_share": True, "text": "see this", "files": [log]}
        await r.slack.user_message("U1", "D1", "what went wrong here?", attachments=[forwarded])
        spec = await agent(r)
        assert [a.name for a in spec.attachments] == ["their.log"]
        assert attached(spec, "their.log") == LOG


async def test_a_message_sent_with_the_shortcut_brings_its_files(rig: RigFactory) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        log = r.slack.user_file("U2", "ci.log", LOG)
        # Files alone, in a channel, to nobody: the shortcut makes it a request.
        posted = await r.slack.user_message("U2", "C1", "", files=[log])
        await r.slack.agent.message_shortcut("U1", "C1", posted.event["ts"], SHORTCUT)
        spec = await agent(r)
        assert [a.name for a in spec.attachments] == ["ci.log"]
        assert "Look at the attached files." in spec.prompt
        assert attached(spec, "ci.log") == LOG


async def test_a_file_an_agent_shares_appears_in_the_thread(rig: RigFactory) -> None:
    async with rig(runtime=HeldRuntime(), slack_settings=limits(max_bytes=1000)) as r:
        ts = await send(r, "draw the chart", [])
        spec = await agent(r)
        folder = Path(spec.cwd)
        (folder / "out").mkdir()
        (folder / "out" / "chart.png").write_bytes(PNG)
        (folder / "huge.bin").write_bytes(b"z" * 2000)
        caller = Caller(spec.agent_id, "developer", "worker", spec.task_slug, 1)

        async def share(path: str, title: str | None = None) -> dict[str, Any]:
            args = ShareFileInput(path=path, title=title)
            return await share_file(r.orchestrator.services, caller, args)

        assert await share("out/chart.png", "The chart") == {
            "shared": True,
            "name": "chart.png",
            "size": "70 B",
        }
        message = await r.slack.wait_for(
            lambda: [m for m in r.slack.thread("D1", ts) if m.get("files")], WAIT
        )
        [file] = message[0]["files"]
        assert file["title"] == "The chart" and file["name"] == "chart.png"
        assert r.slack.uploaded(file["id"]) == PNG
        assert f"developer `{spec.agent_id}` shared a file" in message[0]["text"]

        for path, code in [
            ("../../etc/passwd", "PERMISSION_DENIED"),
            ("/etc/hostname", "PERMISSION_DENIED"),
            ("huge.bin", "LIMIT_EXCEEDED"),
            ("out", "INVALID_INPUT"),
            ("missing.txt", "INVALID_INPUT"),
        ]:
            with pytest.raises(ToolError) as refused:
                await share(path)
            assert refused.value.code == code, path
        (folder / "link").symlink_to("/etc/hostname")
        with pytest.raises(ToolError, match="outside your working folder"):
            await share("link")
        r.held.release()


async def test_a_share_is_of_the_agents_folder_by_handle_and_follows_no_link(
    rig: RigFactory,
) -> None:
    async with rig(runtime=HeldRuntime(), slack_settings=limits(max_bytes=1000)) as r:
        ts = await send(r, "draw the chart", [])
        spec = await agent(r)
        folder = Path(spec.cwd)
        (folder / "out").mkdir()
        (folder / "out" / "chart.png").write_bytes(PNG)
        (folder / "latest.png").symlink_to("out/chart.png")  # a link, even to a file inside
        (folder / "linked").symlink_to(folder / "out")
        os.mkfifo(folder / "pipe")  # opened for reading, it would wait for a writer forever
        caller = Caller(spec.agent_id, "developer", "worker", spec.task_slug, 1)

        async def share(path: str) -> dict[str, Any]:
            return await share_file(r.orchestrator.services, caller, ShareFileInput(path=path))

        # An absolute path inside the folder, spelled plainly, is the same file.
        assert (await share(f"{folder}/./out//chart.png"))["name"] == "chart.png"
        await r.slack.wait_for(lambda: [m for m in r.slack.thread("D1", ts) if m.get("files")])
        for path, code, said in [
            ("latest.png", "PERMISSION_DENIED", "goes through a symbolic link (latest.png)"),
            ("linked/chart.png", "PERMISSION_DENIED", "goes through a symbolic link (linked)"),
            ("out/../out/chart.png", "PERMISSION_DENIED", "outside your working folder"),
            (f"{folder}-other/chart.png", "PERMISSION_DENIED", "outside your working folder"),
            ("pipe", "INVALID_INPUT", "is a FIFO, a device or a socket, not a file"),
            ("out/chart.png/x", "INVALID_INPUT", "out/chart.png is not a folder"),
        ]:
            with pytest.raises(ToolError) as refused:
                await share(path)
            assert (refused.value.code, said in refused.value.message) == (code, True), path
            assert refused.value.suggestion
        r.held.release()


async def test_the_emulator_serves_a_file_to_the_bot_token_only(slack: SlackEmulator) -> None:
    file = slack.user_file("U1", "a.txt", b"a")
    url = file["url_private_download"]
    async with aiohttp.ClientSession() as session:
        for headers, status in [
            ({}, 401),
            ({"Authorization": "Bearer xoxb-someone-else"}, 403),
            ({"Authorization": f"Bearer {BOT_TOKEN}"}, 200),
        ]:
            async with session.get(url, headers=headers) as response:
                assert response.status == status
                if status == 200:
                    assert await response.read() == b"a"


async def test_any_role_shares_a_file_through_its_harness_tools(rig: RigFactory) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        ts = await send(r, "draw the chart", [])
        spec = await agent(r)
        (Path(spec.cwd) / "chart.png").write_bytes(PNG)
        tools = HarnessTools(r.orchestrator.services)
        assert "share_file" in [t.name for t in tools.declarations(spec.role)]
        reply = await tools.call(spec.agent_id, "share_file", {"path": "chart.png"})
        assert not reply.is_error, reply.payload
        await r.slack.wait_for(lambda: [m for m in r.slack.thread("D1", ts) if m.get("files")])
        refused = await tools.call(spec.agent_id, "share_file", {"path": "/etc/hostname"})
        assert refused.is_error
        assert refused.payload["error"]["code"] == "PERMISSION_DENIED"
        assert refused.payload["error"]["suggestion"]
        r.held.release()
