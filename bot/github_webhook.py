"""``POST /github/webhook`` in HTTP mode (and on ``--health-port`` in Socket Mode): GitHub's
check events wake the follower of the pull request they name, so a red check is seen at once
rather than at the next poll; and every event is handed to the ``on: github`` routines, with
its delivery id (``X-GitHub-Delivery``) as the firing's key, so a re-delivery starts nothing.

Signed with ``GITHUB_WEBHOOK_SECRET`` (the secret set on the GitHub webhook); without it the
route says it is not set up, and polling alone follows the checks."""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web

from harness.agents.pull_requests import PullRequests
from harness.forge.webhook import SECRET_ENV, checks_reported, signature_ok

logger = logging.getLogger(__name__)

GITHUB_WEBHOOK_PATH = "/github/webhook"


# What routines make of an event: (event, delivery id, body) -> what each routine did.
Routines = Callable[[str, str, bytes], Awaitable[Sequence[str]]]


def github_webhook(
    pull_requests: PullRequests, routines: Routines | None = None
) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handle(request: web.Request) -> web.Response:
        secret = os.environ.get(SECRET_ENV, "")
        if not secret:
            return web.Response(status=503, text=f"{SECRET_ENV} is not set where the bot runs")
        body = await request.read()
        if not signature_ok(secret, body, request.headers.get("X-Hub-Signature-256")):
            logger.warning("a GitHub webhook delivery with a bad signature was refused")
            return web.Response(status=401, text="bad signature")
        reported = checks_reported(request.headers.get("X-GitHub-Event", ""), body)
        if reported is not None:
            woken = await pull_requests.checks_reported(reported)
            logger.info("GitHub reported checks of %s: looking now at %s", reported.repository,
                        ", ".join(woken) or "no followed pull request")  # fmt: skip
        if routines is not None:
            event = request.headers.get("X-GitHub-Event", "")
            delivery = request.headers.get("X-GitHub-Delivery", "")
            for said in await routines(event, delivery, body):
                logger.info("GitHub %s (delivery %s) for routine %s", event, delivery[:40], said)
        return web.Response(status=202)

    return handle
