"""What the files of a message become: which are fetched within the limits, and what each
fetched file is for the agent. Pure."""

from __future__ import annotations

import pytest
from aiohttp import web
from slack_sdk.web.async_client import AsyncWebClient

from bot.attachments import SlackFile, files_of, left_out_text, media_type_of, select
from bot.downloads import FileDownloads
from harness.config.settings import FileLimits
from harness.runtime.attachments import LeftOut


def test_the_files_of_a_message_and_of_the_messages_forwarded_in_it() -> None:
    own = {"id": "F1", "name": "a.log", "size": 3, "url_private_download": "https://x/a"}
    event = {
        "files": [own, {"id": "F1"}, {"no": "id"}],
        "attachments": [{"files": [{"id": "F2", "title": "b", "mode": "tombstone"}]}, "junk"],
    }
    assert files_of(event) == (
        SlackFile("F1", "a.log", "", 3, "https://x/a"),
        SlackFile("F2", "b", gone="it was deleted"),
    )
    assert files_of({}) == ()


def test_select_keeps_the_first_files_within_the_limits() -> None:
    files = [
        SlackFile("F1", "big", size=11),
        SlackFile("F2", "a", size=10),
        SlackFile("F3", "b"),  # size unknown: fetched, and checked as it downloads
        SlackFile("F4", "c", size=1),
    ]
    kept, left = select(files, FileLimits(max_bytes=10, max_count=2))
    assert [f.name for f in kept] == ["a", "b"]
    assert left == (
        LeftOut("big", "11 B, over the 10 B limit (`slack.files.maxBytes` in config.yaml)"),
        LeftOut("c", "a message may attach 2 file(s) (`slack.files.maxCount` in config.yaml)"),
    )


@pytest.mark.parametrize(
    ("mimetype", "content", "media_type"),
    [
        ("image/png", b"\x89PNG\r\n\x1a\n...", "image/png"),
        ("application/octet-stream", b"\xff\xd8\xff\xe0...", "image/jpeg"),  # bytes decide
        ("image/gif", b"GIF89a...", "image/gif"),
        ("", b"RIFF\0\0\0\0WEBPVP8 ", "image/webp"),
        ("image/png", b"not a png", None),  # an image that is not one
        ("image/svg+xml", b"<svg/>", None),
        ("text/csv", b"a,b\n1,2\n", "text/csv"),
        ("", "diff --git a/x b/x\n+é\n".encode(), "text/plain"),
        ("application/json", b'{"a": 1}', "text/plain"),
        ("text/plain", b"caf\xe9", None),  # not UTF-8
        ("application/pdf", b"%PDF-1.7", None),
        ("application/octet-stream", b"\x00\x01\x02", None),
    ],
)
def test_what_a_fetched_file_is(mimetype: str, content: bytes, media_type: str | None) -> None:
    assert media_type_of(SlackFile("F1", "f", mimetype), content) == media_type


def test_the_thread_hears_what_was_left_out() -> None:
    left = [LeftOut("a.zip", "not an image"), LeftOut("b.log", "too big")]
    assert left_out_text(left, kept=1) == (
        "I left out these 2 files:\n• `a.zip`: not an image\n• `b.log`: too big\n"
        "I went ahead with the rest of your message and files."
    )


@pytest.mark.anyio
async def test_a_download_redirected_away_from_slack_is_not_followed_with_the_token() -> None:
    hits: list[str] = []

    async def file(request: web.Request) -> web.Response:
        hits.append(f"file {request.headers.get('Authorization')}")
        away = f"http://localhost:{request.url.port}/away"  # another host than the API's
        raise web.HTTPFound(away)

    async def away(request: web.Request) -> web.Response:
        hits.append(f"away {request.headers.get('Authorization')}")
        return web.Response(text="stolen")

    app = web.Application()
    app.router.add_get("/files/log.txt", file)
    app.router.add_get("/away", away)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        client = AsyncWebClient(token="xoxb-secret", base_url=f"http://127.0.0.1:{port}/api/")
        url = f"http://127.0.0.1:{port}/files/log.txt"
        got, left = await FileDownloads(client, FileLimits()).fetch_all(
            [SlackFile("F1", "log.txt", "text/plain", 5, url)]
        )
    finally:
        await runner.cleanup()

    assert got == ()
    assert [f.reason for f in left] == ["I cannot read it: its link leads away from Slack"]
    assert hits == ["file Bearer xoxb-secret"]  # the token never went to the other host
