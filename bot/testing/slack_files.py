"""Files people share in the emulator's messages: their file objects (as message events carry
them), ``files.info``, and their download links, served to the bot's token alone."""

from __future__ import annotations

import copy
import mimetypes
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web

from bot.testing.slack_model import JSON, ApiError, Identity

DOWNLOAD_ROUTE = "/files-pri/{key}/download/{name}"


@dataclass
class _Shared:
    info: JSON
    content: bytes
    # files.info's error for the bot ("not_in_channel", "file_not_found"); downloads get 403.
    refuse: str | None = None
    downloads: list[str] = field(default_factory=list)  # the Authorization header of each
    # Where its download redirects (a CDN, say), instead of serving its bytes.
    redirect: str | None = None


class SharedFiles:
    """The files users shared, by id."""

    def __init__(self, identity: Identity, base_url: Callable[[], str]) -> None:
        self.identity = identity
        self._base_url = base_url
        self._files: dict[str, _Shared] = {}

    def add(
        self,
        user: str,
        name: str,
        content: bytes,
        *,
        mimetype: str | None = None,
        size: int | None = None,
        refuse: str | None = None,
        with_url: bool = True,
        redirect: str | None = None,
    ) -> JSON:
        """A file ``user`` shares: the file object for ``user_message(files=[...])``. ``size``
        overrides the one Slack states; ``refuse`` makes it one the bot may not see (its
        files.info error; its download answers 403); without ``with_url`` the event carries
        no link, so the bot asks files.info for it; with ``redirect`` its download answers 302
        to that URL."""
        file_id = f"FU{len(self._files) + 1:07d}"
        kind = mimetype or mimetypes.guess_type(name)[0] or "application/octet-stream"
        key = f"{self.identity.team_id}-{file_id}"
        base = f"{self._base_url()}/files-pri/{key}"
        info: JSON = {
            "id": file_id,
            "name": name,
            "title": name,
            "mimetype": kind,
            "filetype": name.rpartition(".")[2] if "." in name else "binary",
            "size": len(content) if size is None else size,
            "user": user,
            "mode": "hosted",
            "is_external": False,
            "url_private": f"{base}/{name}",
            "url_private_download": f"{base}/download/{name}",
        }
        self._files[file_id] = _Shared(info, content, refuse, redirect=redirect)
        shown = copy.deepcopy(info)
        if not with_url:
            del shown["url_private"], shown["url_private_download"]
        return shown

    def downloads(self, file_id: str) -> list[str]:
        """The Authorization header of each download of the file ("" when there was none)."""
        return list(self._files[file_id].downloads)

    def info(self, params: JSON) -> JSON:
        """``files.info``."""
        shared = self._files.get(str(params.get("file") or ""))
        if shared is None:
            raise ApiError("file_not_found")
        if shared.refuse:
            raise ApiError(shared.refuse)
        return {"file": copy.deepcopy(shared.info)}

    async def download(self, request: web.Request) -> web.Response:
        """A file's ``url_private_download``: its bytes to the bot's token, 401 without one,
        403 to any other token or for a file the bot may not see."""
        file_id = request.match_info["key"].rpartition("-")[2]
        shared = self._files.get(file_id)
        if shared is None:
            return web.Response(status=404, text="no such file")
        authorization = request.headers.get("Authorization", "")
        shared.downloads.append(authorization)
        if shared.redirect is not None:
            raise web.HTTPFound(shared.redirect)
        if not authorization:
            return web.Response(status=401, text="sign in to download this file")
        if authorization != f"Bearer {self.identity.bot_token}" or shared.refuse:
            return web.Response(status=403, text="you may not download this file")
        kind = str(shared.info["mimetype"])
        return web.Response(body=shared.content, content_type=kind)
