"""People's linked GitHub accounts: a service of the core.

A person links their account from a front end through GitHub's device flow
(``start_github_link``: they are shown a code to enter on GitHub, and the link completes in
the background once they approve); from then on the pull requests they ask for are opened
as them (``pull_requests.py`` looks their token up in the same store). Accounts are kept
per GitHub API (``github.apiUrl``), encrypted, in the task store's folder.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.clock import SYSTEM, Clock
from harness.config.settings import Config
from harness.errors import ForgeError
from harness.forge.accounts import AccountStore
from harness.forge.device_flow import DeviceCode, DeviceFlow

if TYPE_CHECKING:  # imported when an account is linked: an orchestrator is built without it
    import aiohttp

logger = logging.getLogger(__name__)

# Each request of the flow; the wait for the person is bounded by the code's expiry instead.
REQUEST_TIMEOUT_SECONDS = 30


@dataclass(frozen=True)
class DeviceLogin:
    """A link under way: the person enters ``user_code`` at ``verification_uri`` within
    ``expires_in`` seconds; ``linked`` completes with their GitHub login once the account
    is linked, or raises ForgeError (denied, expired) or CancelledError (superseded by a
    newer link, or unlinked meanwhile)."""

    user_code: str
    verification_uri: str
    expires_in: int
    linked: asyncio.Future[str]


class AccountLinks:
    """Links and unlinks people's GitHub accounts; the pull requests read them from
    ``accounts`` (the same store)."""

    def __init__(self, config: Config, accounts: AccountStore, clock: Clock = SYSTEM) -> None:
        self._config = config
        self._accounts = accounts
        self._clock = clock  # bounds a link's wait for its code
        self._github_links: dict[str, asyncio.Task[str]] = {}

    async def start_github_link(self, user: str) -> DeviceLogin:
        """Begin linking ``user``'s GitHub account (on ``github.apiUrl``): the code to show
        them, and the link completing in the background. An earlier link of theirs still
        waiting is given up. ForgeError when GitHub cannot be asked, or no ``github.clientId``
        is configured."""
        settings = self._config.github
        if settings.client_id is None:
            raise ForgeError(
                "credentials",
                "linking GitHub accounts is not set up: config.yaml has no `github.clientId`",
                fix="register an OAuth App (or a GitHub App) with the device flow enabled, and "
                "set `github.clientId` to its client id in config.yaml",
            )
        async with self._link_session() as session:
            code = await self._flow(session).start()
        earlier = self._github_links.pop(user, None)
        if earlier is not None:
            earlier.cancel()
        linking = asyncio.create_task(self._finish_link(user, code), name=f"GitHub link of {user}")
        self._github_links[user] = linking
        linking.add_done_callback(lambda done: self._forget_link(user, done))
        return DeviceLogin(code.user_code, code.verification_uri, code.expires_in, linking)

    async def unlink_github(self, user: str) -> bool:
        """Forget ``user``'s GitHub account (and stop a link of theirs still waiting): their
        pull requests are opened by the bot again. False when none was linked."""
        waiting = self._github_links.pop(user, None)
        if waiting is not None:
            waiting.cancel()
        return await self._accounts.unlink(user, self._config.github.api_url)

    async def github_login(self, user: str) -> str | None:
        """The GitHub login ``user`` linked (on ``github.apiUrl``), None when none."""
        return await self._accounts.login(user, self._config.github.api_url)

    async def _finish_link(self, user: str, code: DeviceCode) -> str:
        # A session of its own: made only once the task runs, so one cancelled before it
        # started leaves nothing open.
        async with self._link_session() as session:
            granted = await self._flow(session).finish(code)
        await self._accounts.link(user, self._config.github.api_url, granted.login,
                                  granted.token)  # fmt: skip
        return granted.login

    def _flow(self, session: aiohttp.ClientSession) -> DeviceFlow:
        settings = self._config.github
        assert settings.client_id is not None
        return DeviceFlow(session, web_url=settings.web_url, api_url=settings.api_url,
                          client_id=settings.client_id, clock=self._clock.monotonic)  # fmt: skip

    @staticmethod
    def _link_session() -> aiohttp.ClientSession:
        import aiohttp

        return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_SECONDS))

    def _forget_link(self, user: str, done: asyncio.Task[str]) -> None:
        if self._github_links.get(user) is done:
            del self._github_links[user]
        if not done.cancelled() and done.exception() is not None:
            # Retrieved here so an unawaited failure is not reported as never retrieved.
            logger.info("linking %s's GitHub account ended: %s", user, done.exception())
