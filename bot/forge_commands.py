"""``/harness connect github`` and ``/harness disconnect github``: a person links their GitHub
account (their pull requests are then opened as them), or unlinks it.

Connect answers at once with the code to enter on GitHub; the link completes in the
background, and the person is told (ephemerally, where they typed the command) when it is
linked, or why not and how to try again. Every answer is shown to that person only. The wait
is kept in the ledger (``bot/clicks.py``): a bot stopped before the link completed tells
the person at its next start to connect again (the code died with it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.respond.async_respond import AsyncRespond

from bot.background import Background
from bot.blocks import escape
from bot.clicks import Clicks, KeptClick, click_key
from bot.poster import CALL_ERRORS, Poster
from harness.agents.account_links import AccountLinks, DeviceLogin
from harness.errors import HarnessError
from harness.tasks.model import ThreadRef

logger = logging.getLogger(__name__)

CONNECT = "`/harness connect github`"
SORRY = "Sorry, that did not work; an admin can find the details in the bot's log."
CUT_SHORT = (
    "I restarted before your GitHub account was linked, so it is not: run "
    f"{CONNECT} again for a new code."
)

Say = Callable[[str], Awaitable[None]]


# ------------------------------------------------------------------ pure views


def render_code(login: DeviceLogin, linked_as: str | None) -> str:
    minutes = max(1, login.expires_in // 60)
    again = f"You are linked as @{escape(linked_as)}; this links again.\n" if linked_as else ""
    return (
        f"{again}Open {login.verification_uri} and enter {escape(login.user_code)} within "
        f"{minutes} minutes to link your GitHub account. I'll tell you here once it is linked."
    )


def render_linked(login: str) -> str:
    return f"Linked: your pull requests are now opened as @{escape(login)}."


def render_failure(error: HarnessError, doing: str) -> str:
    fix = f" {escape(error.fix[:1].upper() + error.fix[1:])}." if error.fix else ""
    return f"{doing}: {escape(error.message)}.{fix}"


def render_unlinked(was_linked: bool) -> str:
    if not was_linked:
        return f"No GitHub account of yours is linked; {CONNECT} links one."
    return (
        "Unlinked: the bot opens your pull requests again. To withdraw the token too, revoke "
        "the app under Settings → Applications on GitHub."
    )


# ------------------------------------------------------------------ the commands


class ForgeCommands:
    """Part of ``Commands``: the answers of connect and disconnect."""

    def __init__(
        self, accounts: AccountLinks, poster: Poster, background: Background, *, within: float
    ) -> None:
        self.accounts = accounts
        self.poster = poster
        self.background = background
        self.within = within  # how long an answer in the ack may take
        # Where a wait for a link is kept across restarts (None: not kept).
        self.clicks: Clicks | None = None

    async def resume_link(self, click: KeptClick) -> None:
        """A wait for a link cut short by a stop: the person hears to connect again."""
        channel = click.thread.channel
        await self.poster.ephemeral(channel, click.user, CUT_SHORT, click.thread.thread_ts or None)
        await self._settle(click.user)

    async def _settle(self, user: str) -> None:
        if self.clicks is not None:
            await self.clicks.settle(click_key("link", user))

    async def handle(
        self,
        name: str,
        user: str,
        channel: str,
        ack: AsyncAck,
        respond: AsyncRespond,
        *,
        can_respond: bool,
    ) -> str:
        """Answers ``connect`` or ``disconnect``; what was done, in a few words."""

        async def say(text: str) -> None:
            if can_respond:
                try:
                    await respond(text=text, response_type="ephemeral")
                except CALL_ERRORS as exc:
                    logger.warning("could not answer /harness %s github: %s", name, exc)
            else:  # no response_url: a message only they see, where they typed the command
                await self.poster.ephemeral(channel, user, text, None)

        def work() -> Awaitable[tuple[str, str]]:
            return (
                self._connect(user, channel, say) if name == "connect" else self._disconnect(user)
            )

        if can_respond:
            await ack()
            text, outcome = await work()
            await say(text)
            return outcome
        # Nowhere to answer later: the answer goes in the ack, which Slack waits 3 s for.
        try:
            async with asyncio.timeout(self.within):
                text, outcome = await work()
        except TimeoutError:
            text, outcome = "Sorry, GitHub took too long to answer; try again.", "timed out"
        await ack(text=text)
        return outcome

    async def _connect(self, user: str, channel: str, say: Say) -> tuple[str, str]:
        try:
            linked_as = await self.accounts.github_login(user)
            login = await self.accounts.start_github_link(user)
        except HarnessError as exc:
            return render_failure(exc, "Not linked"), "connect github: refused"
        except Exception:  # the top of a command's work: the person must hear back
            logger.exception("/harness connect github failed")
            return SORRY, "connect github: failed"
        if self.clicks is not None:  # kept before the code is shown
            await self.clicks.take("link", user, user, ThreadRef(channel, ""))
        self.background.spawn(
            self._tell_when_linked(login, user, say), name=f"GitHub link of {user}"
        )
        return render_code(login, linked_as), "connect github: code shown"

    async def _tell_when_linked(self, login: DeviceLogin, user: str, say: Say) -> None:
        try:
            text = render_linked(await login.linked)
        except HarnessError as exc:
            text = render_failure(exc, "Not linked")
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # the bot is stopping
            return  # a newer connect, or a disconnect, took its place: that one answers
        except Exception:
            logger.exception("linking a GitHub account failed")
            text = SORRY
        await say(text)
        await self._settle(user)

    async def _disconnect(self, user: str) -> tuple[str, str]:
        try:
            was_linked = await self.accounts.unlink_github(user)
        except HarnessError as exc:
            return render_failure(exc, "Not unlinked"), "disconnect github: refused"
        except Exception:
            logger.exception("/harness disconnect github failed")
            return SORRY, "disconnect github: failed"
        await self._settle(user)  # a link it waited for ends too: nothing to resume
        outcome = "unlinked" if was_linked else "nothing linked"
        return render_unlinked(was_linked), f"disconnect github: {outcome}"
