"""Downloading the files of a person's message for its agent.

Each file comes from its ``url_private_download`` (asked of ``files.info`` when the event
has none), with the bot token in an Authorization header (the bot needs the ``files:read``
scope), and only to Slack's own hosts over https or the origin (scheme, host and port) the Web
API base points at (the tests' emulator), a redirect included: the token is never sent
anywhere else. What cannot be had becomes a ``LeftOut`` whose reason tells the person what
to do.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from urllib.parse import urlsplit

import aiohttp
from slack_sdk.web.async_client import AsyncWebClient
from yarl import URL

from bot.attachments import UNSUPPORTED, SlackFile, media_type_of, over_size, select
from bot.poster import CALL_ERRORS, classify
from harness.config.settings import FileLimits
from harness.runtime.attachments import Attachment, LeftOut, attachment

logger = logging.getLogger(__name__)

_TIMEOUT = aiohttp.ClientTimeout(total=120, sock_connect=15)
# Slack's answers to files.info that a person can act on.
_REASONS = {
    "file_not_found": "Slack says it does not exist any more (deleted?)",
    "file_deleted": "it was deleted",
    "not_in_channel": "I am not in the channel it was shared in: invite me there, or share "
    "it again here",
    "access_denied": "I may not see it",
    "missing_scope": "I lack Slack's `files:read` scope: ask an admin to add it to the app",
}
_SCOPE = "(the app needs Slack's `files:read` scope, and to be in the channel it was shared in)"


Origin = tuple[str, str, int]


def _origin(url: str) -> Origin | None:
    """``url``'s scheme, host and port (the scheme's default when it names none); None for
    anything but an http(s) URL with a host and a valid port."""
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:  # a port out of range or not a number
        return None
    if scheme not in ("http", "https") or not host:
        return None
    return scheme, host, port or (443 if scheme == "https" else 80)


def _trusted(url: str, api_url: str) -> bool:
    """Whether the bot's token may go to ``url``: Slack's hosts over https, or the Web API's
    own origin. Origins, not host names: another port of the same host is another server."""
    origin = _origin(url)
    if origin is None:
        return False
    if origin == _origin(api_url):
        return True
    scheme, host, port = origin
    slack = host == "slack.com" or host.endswith((".slack.com", ".slack-gov.com"))
    return scheme == "https" and port == 443 and slack


def token_may_follow(came_from: str, url: str, api_url: str) -> bool:
    """Whether a redirect from ``came_from`` to ``url`` may carry the token: a trusted origin,
    and never from https down to http."""
    secure = [urlsplit(u).scheme.lower() == "https" for u in (came_from, url)]
    return secure != [True, False] and _trusted(url, api_url)


class FileDownloads:
    """Fetches a message's files for its agent, within ``limits``."""

    def __init__(self, client: AsyncWebClient, limits: FileLimits) -> None:
        self.client = client
        self.limits = limits

    async def fetch_all(
        self, files: Sequence[SlackFile]
    ) -> tuple[tuple[Attachment, ...], tuple[LeftOut, ...]]:
        """The attachments the agent gets, and the files left out with why, in order."""
        chosen, left_out = select(files, self.limits)
        if not chosen:
            return (), left_out
        proxy = getattr(self.client, "proxy", None)
        async with aiohttp.ClientSession(timeout=_TIMEOUT, proxy=proxy) as session:
            fetched = await asyncio.gather(*(self._fetch(session, f) for f in chosen))
        attachments: list[Attachment] = []
        left = list(left_out)
        for file, got in zip(chosen, fetched, strict=True):
            if isinstance(got, LeftOut):
                left.append(got)
                continue
            media_type = media_type_of(file, got)
            if media_type is None:
                left.append(LeftOut(file.name, UNSUPPORTED))
                continue
            taken = [a.name for a in attachments]
            attachments.append(attachment(file.name, media_type, got, taken))
        return tuple(attachments), tuple(left)

    async def _url(self, file: SlackFile) -> str | LeftOut:
        if file.url:
            return file.url
        try:
            response = await self.client.files_info(file=file.id)
        except CALL_ERRORS as exc:
            error = classify(exc).error
            logger.info("files.info of %s failed: %s", file.id, error)
            reason = _REASONS.get(error, f"Slack would not describe it ({error})")
            return LeftOut(file.name, f"I cannot read it: {reason}")
        info = response.get("file")
        url = None
        if isinstance(info, dict):
            url = info.get("url_private_download") or info.get("url_private")
        if not isinstance(url, str) or not url:
            return LeftOut(file.name, "I cannot read it: Slack gave no link to download it")
        return url

    async def _get(
        self,
        session: aiohttp.ClientSession,
        url: str,
        headers: dict[str, str],
        file: SlackFile,
        limit: int,
    ) -> bytes | LeftOut:
        """The file's bytes (up to ``limit`` + 1). Redirects are followed by hand, a few hops
        at most: the token goes with each request, so each hop is checked before it."""
        came_from = url
        for _ in range(4):
            if not token_may_follow(came_from, url, self.client.base_url):
                return LeftOut(file.name, "I cannot read it: its link leads away from Slack")
            came_from = url
            async with session.get(url, headers=headers, allow_redirects=False) as response:
                location = response.headers.get("Location")
                if response.status in (301, 302, 303, 307, 308) and location:
                    url = str(response.url.join(URL(location)))
                    continue
                if response.status in (401, 403, 404):
                    what = "no such file" if response.status == 404 else "refused"
                    logger.info("download of %s: HTTP %d", file.id, response.status)
                    return LeftOut(
                        file.name,
                        f"I cannot read it: Slack {what} (HTTP {response.status}) {_SCOPE}",
                    )
                if response.status != 200:
                    return LeftOut(
                        file.name, f"I could not download it (HTTP {response.status}): try again"
                    )
                if response.content_type == "text/html" and "html" not in file.mimetype:
                    # Slack's sign-in page, which is what a token without files:read gets.
                    return LeftOut(file.name, f"I cannot read it: Slack sent a web page {_SCOPE}")
                content = await response.content.read(limit + 1)
                while len(content) <= limit and (more := await response.content.read(65_536)):
                    content += more
                return content
        return LeftOut(file.name, "I could not download it (too many redirects): try again")

    async def _fetch(self, session: aiohttp.ClientSession, file: SlackFile) -> bytes | LeftOut:
        url = await self._url(file)
        if isinstance(url, LeftOut):
            return url
        if not _trusted(url, self.client.base_url):
            return LeftOut(file.name, "I cannot read it: its link does not lead to Slack")
        if not self.client.token:
            return LeftOut(file.name, "I cannot read it: the bot has no token to download with")
        headers = {"Authorization": f"Bearer {self.client.token}"}
        limit = self.limits.max_bytes
        try:
            got = await self._get(session, url, headers, file, limit)
            if isinstance(got, LeftOut):
                return got
            content = got
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            logger.info("download of %s failed: %r", file.id, exc)
            return LeftOut(file.name, "I could not download it (the network failed): try again")
        if len(content) > limit:
            return over_size(file.name, None, self.limits)
        return content
