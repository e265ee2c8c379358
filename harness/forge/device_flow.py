"""GitHub's OAuth device flow: how a person links their GitHub account from a front end.

``DeviceFlow.start`` asks GitHub's web host for a device code (the person opens the
verification page and types the user code there); ``finish`` polls for the token at the
interval GitHub asks for, until the person approves, denies, or the code expires, and then
asks the API whose token it is. ``read_poll`` (pure) says what one poll's answer means.
Every way it fails is a ``ForgeError`` saying what to do. Tokens are never logged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.clock import SYSTEM
from harness.errors import ForgeError

if TYPE_CHECKING:  # imported where GitHub is called: an orchestrator is built without it
    import aiohttp

logger = logging.getLogger(__name__)

GRANT_TYPE = "urn:ietf:params:oauth:grant-type:device_code"
SCOPE = "repo"  # opening pull requests in private repositories needs it
DEFAULT_INTERVAL_SECONDS = 5  # GitHub's, when an answer names none
SLOW_DOWN_SECONDS = 5  # what each slow_down adds to the interval (GitHub's documented rule)
# A server that says 0 s is not hammered in a tight loop.
MIN_INTERVAL_SECONDS = 0.05
CONNECT_AGAIN = "try again with `/harness connect github`"

Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class DeviceCode:
    """What the person is shown (``user_code`` to type at ``verification_uri`` within
    ``expires_in`` seconds) and what the poll sends (``device_code``)."""

    device_code: str = field(repr=False)
    user_code: str
    verification_uri: str
    expires_in: int
    interval: int


@dataclass(frozen=True)
class GrantedToken:
    login: str
    token: str = field(repr=False)


@dataclass(frozen=True)
class Pending:
    """No token yet: poll again after ``interval`` seconds."""

    interval: float


def client_error(client_id: str, web_url: str) -> ForgeError:
    return ForgeError(
        "credentials",
        f"GitHub at {web_url} does not know the client id {client_id!r}",
        fix="set `github.clientId` in config.yaml to the client id of an OAuth App (or a "
        "GitHub App) whose device flow is enabled, and `github.webUrl` to its GitHub",
    )


def read_poll(
    answer: Mapping[str, Any], interval: float, *, client_id: str, web_url: str
) -> str | Pending:
    """One answer of ``/login/oauth/access_token``: the token (a str), ``Pending`` with the
    interval to wait, or a ForgeError raised for an end without a token (pure)."""
    token = answer.get("access_token")
    if isinstance(token, str) and token:
        return token
    error = str(answer.get("error") or "")
    if error == "authorization_pending":
        return Pending(interval)
    if error == "slow_down":
        given = answer.get("interval")
        return Pending(
            float(given) if isinstance(given, int | float) else interval + SLOW_DOWN_SECONDS
        )
    if error == "expired_token":
        raise expired_error()
    if error == "access_denied":
        raise ForgeError(
            "credentials",
            "the request to link your GitHub account was denied on GitHub",
            fix=f"{CONNECT_AGAIN}, and choose Authorize on GitHub's page",
        )
    if error == "incorrect_client_credentials":
        raise client_error(client_id, web_url)
    if error == "device_flow_disabled":
        raise ForgeError(
            "credentials",
            f"the device flow is not enabled for the client id {client_id!r}",
            fix="enable “Device Flow” in the settings of the OAuth App (or GitHub App) "
            "`github.clientId` names",
        )
    said = str(answer.get("error_description") or error or "no token and no error")
    raise ForgeError("rejected", f"GitHub refused to link the account: {said}",
                     fix=CONNECT_AGAIN)  # fmt: skip


def expired_error() -> ForgeError:
    return ForgeError(
        "credentials",
        "the code to link your GitHub account expired before it was entered",
        fix=f"{CONNECT_AGAIN}, and enter the new code on GitHub's page in time",
    )


class DeviceFlow:
    """The device flow of one client id against one GitHub (``web_url`` signs in,
    ``api_url`` says whose a token is). ``sleep`` and ``clock`` are the waits between polls
    and the time that bounds them (tests pass their own, to skip the waiting)."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        web_url: str,
        api_url: str,
        client_id: str,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = SYSTEM.monotonic,
    ) -> None:
        self._session = session
        self._web_url = web_url.rstrip("/")
        self._api_url = api_url.rstrip("/")
        self._client_id = client_id
        self._sleep = sleep
        self._clock = clock

    async def start(self) -> DeviceCode:
        form = {"client_id": self._client_id, "scope": SCOPE}
        answer = await self._post("/login/device/code", form)
        if answer.get("error") == "incorrect_client_credentials":
            raise client_error(self._client_id, self._web_url)
        try:
            return DeviceCode(
                device_code=str(answer["device_code"]),
                user_code=str(answer["user_code"]),
                verification_uri=str(answer["verification_uri"]),
                expires_in=int(answer["expires_in"]),
                interval=int(answer.get("interval", DEFAULT_INTERVAL_SECONDS)),
            )
        except (KeyError, TypeError, ValueError):
            said = answer.get("error_description") or answer.get("error") or "no device code"
            raise ForgeError(
                "rejected",
                f"GitHub at {self._web_url} gave no device code ({said})",
                fix="check `github.clientId` and `github.webUrl` in config.yaml",
            ) from None

    async def finish(self, code: DeviceCode) -> GrantedToken:
        """Polls until the person approves (their login and token), denies, or the code
        expires (ForgeError); never longer than ``code.expires_in``. Cancellable."""
        token = await self.wait_for_token(code)
        return GrantedToken(await self.login_of(token), token)

    async def wait_for_token(self, code: DeviceCode) -> str:
        deadline = self._clock() + code.expires_in
        interval: float = code.interval
        form = {
            "client_id": self._client_id,
            "device_code": code.device_code,
            "grant_type": GRANT_TYPE,
        }
        while True:
            wait = max(interval, MIN_INTERVAL_SECONDS)
            if self._clock() + wait > deadline:
                raise expired_error()  # GitHub would only say so after the next wait
            await self._sleep(wait)
            try:
                answer = await self._post("/login/oauth/access_token", form)
            except ForgeError as exc:
                if exc.failure not in ("unavailable", "rate-limited"):
                    raise
                # A blip while the person is still on GitHub's page must not lose the link.
                logger.warning("polling GitHub for a linked account: %s", exc.message)
                continue
            step = read_poll(answer, interval, client_id=self._client_id, web_url=self._web_url)
            if isinstance(step, str):
                return step
            interval = step.interval

    async def login_of(self, token: str) -> str:
        import aiohttp

        url = f"{self._api_url}/user"
        headers = {"Authorization": f"token {token}", "Accept": "application/vnd.github+json"}
        try:
            async with self._session.get(url, headers=headers) as response:
                if response.status == 401:
                    raise ForgeError(
                        "credentials",
                        f"GitHub at {self._api_url} refused the token it just granted",
                        fix=f"check that `github.apiUrl` and `github.webUrl` name the same "
                        f"GitHub, then {CONNECT_AGAIN}",
                        status=401,
                    )
                if response.status >= 400:
                    raise _answered(response.status, f"asking GitHub at {url} whose token it is")
                data = await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise _unreachable(self._api_url, exc) from exc
        login = data.get("login") if isinstance(data, dict) else None
        if not isinstance(login, str) or not login:
            raise ForgeError("rejected", f"GitHub at {url} named no login for the token",
                             fix="check `github.apiUrl` in config.yaml")  # fmt: skip
        return login

    async def _post(self, path: str, form: Mapping[str, str]) -> dict[str, Any]:
        import aiohttp

        url = f"{self._web_url}{path}"
        try:
            async with self._session.post(
                url, data=dict(form), headers={"Accept": "application/json"}
            ) as response:
                if response.status >= 500 or response.status == 429:
                    raise _answered(response.status, f"asking GitHub at {url}")
                try:
                    data = await response.json(content_type=None)
                except ValueError:
                    data = None
                if not isinstance(data, dict):
                    raise ForgeError(
                        "rejected",
                        f"GitHub at {url} did not answer with JSON ({response.status})",
                        fix="check `github.webUrl` in config.yaml (github.com, or your GitHub "
                        "Enterprise host)",
                        status=response.status,
                    )
                return data
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _unreachable(self._web_url, exc) from exc


def _answered(status: int, doing: str) -> ForgeError:
    if status == 429:
        return ForgeError("rate-limited", f"GitHub's rate limit stopped {doing}",
                          fix="try again in a while", status=status)  # fmt: skip
    if status >= 500:
        return ForgeError("unavailable", f"GitHub failed while {doing} ({status})",
                          fix="try again in a minute", status=status)  # fmt: skip
    return ForgeError("rejected", f"GitHub refused {doing} ({status})",
                      fix="check `github.apiUrl` in config.yaml", status=status)  # fmt: skip


def _unreachable(where: str, exc: BaseException) -> ForgeError:
    return ForgeError(
        "unavailable",
        f"could not reach GitHub at {where}: {exc!r}",
        fix="check the network and `github.webUrl` / `github.apiUrl`, then try again",
    )
