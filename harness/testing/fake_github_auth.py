"""Credentials of the loopback GitHub fake (`harness.testing.fake_github`): tokens, GitHub Apps
(RS256 JWTs and installation tokens) and the OAuth device flow of GitHub's web host."""

from __future__ import annotations

import secrets
import string
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlencode

import jwt
from aiohttp import web

from harness.testing.fake_github_model import BODY, JSON, ApiError, iso, not_found

GRANT_TYPE = "urn:ietf:params:oauth:grant-type:device_code"
# GitHub's user codes: 8 letters without vowels or look-alikes, in two groups.
_CODE_LETTERS = "BCDFGHJKLMNPQRSTVWXZ"


@dataclass(frozen=True)
class Credential:
    """What a token stands for. An installation token reaches its installation's repositories
    only (`repos`), as the app's bot account."""

    login: str
    scopes: tuple[str, ...]
    kind: Literal["user", "installation"] = "user"
    repos: frozenset[str] | None = None


@dataclass
class App:
    app_id: int
    public_key: str | bytes
    installations: dict[int, set[str]]
    slug: str

    @property
    def bot_login(self) -> str:
        return f"{self.slug}[bot]"


@dataclass
class _Device:
    device_code: str
    user_code: str
    client_id: str
    scope: str
    expires_at: float
    interval: int
    last_poll: float
    state: Literal["pending", "approved", "denied", "expired", "used"] = "pending"
    token: str | None = None


def _user_code() -> str:
    letters = "".join(secrets.choice(_CODE_LETTERS) for _ in range(8))
    return f"{letters[:4]}-{letters[4:]}"


def new_token(prefix: str) -> str:
    alphabet = string.ascii_letters + string.digits
    return prefix + "".join(secrets.choice(alphabet) for _ in range(36))


def bearer(request: web.Request) -> str | None:
    """The token of `Authorization: token T` or `Bearer T` (any case, as GitHub takes it)."""
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() in ("token", "bearer") and value.strip():
        return value.strip()
    return None


class Credentials:
    """Tokens, apps and device codes; `clock` (monotonic seconds) lets tests age device codes."""

    def __init__(self, *, device_interval: int, device_expires_in: int) -> None:
        self.tokens: dict[str, Credential] = {}
        self.apps: dict[int, App] = {}
        self.oauth_clients: set[str] = set()
        self.device_interval = device_interval
        self.device_expires_in = device_expires_in
        self.clock: Callable[[], float] = time.monotonic
        self._devices: dict[str, _Device] = {}

    # ---- tokens and apps

    def user(self, request: web.Request) -> Credential:
        token = bearer(request)
        if token is None:
            raise ApiError(401, "Requires authentication")
        credential = self.tokens.get(token)
        if credential is None:
            raise ApiError(401, "Bad credentials")
        return credential

    def app(self, request: web.Request) -> App:
        """The app whose RS256 JWT (`iss` = app id) authenticates `request`."""
        token = bearer(request)
        if token is None:
            raise ApiError(401, "A JSON web token could not be decoded")
        try:
            claims = jwt.decode(token, options={"verify_signature": False})
            app = self.apps.get(int(claims.get("iss", 0)))
            if app is None:
                raise ApiError(401, "A JSON web token could not be decoded")
            claims = jwt.decode(
                token,
                app.public_key,
                algorithms=["RS256"],
                options={"require": ["iat", "exp", "iss"]},
                leeway=60,
            )
        except (jwt.PyJWTError, ValueError, TypeError):
            raise ApiError(401, "A JSON web token could not be decoded") from None
        # GitHub refuses app JWTs that live longer than 10 minutes.
        if int(claims["exp"]) - int(claims["iat"]) > 600:
            raise ApiError(401, "'Expiration time' claim ('exp') is too far in the future")
        return app

    def installation_of(self, app: App, full_name: str) -> int:
        for installation_id, repos in app.installations.items():
            if full_name.lower() in {r.lower() for r in repos}:
                return installation_id
        raise not_found()

    def mint_installation_token(self, app: App, installation_id: int) -> JSON:
        repos = app.installations.get(installation_id)
        if repos is None:
            raise not_found()
        token = new_token("ghs_")
        scope = frozenset(r.lower() for r in repos)
        self.tokens[token] = Credential(app.bot_login, (), "installation", scope)
        return {
            "token": token,
            "expires_at": iso(plus=3600),
            "permissions": {"contents": "write", "pull_requests": "write", "checks": "read"},
            "repository_selection": "selected",
        }

    # ---- device flow (https://docs.github.com/apps/oauth-apps, "device flow")

    def device_code(self, client_id: str, scope: str, web_url: str) -> JSON:
        if client_id not in self.oauth_clients:
            return _incorrect_client()
        now = self.clock()
        device = _Device(
            device_code=secrets.token_hex(20),
            user_code=_user_code(),
            client_id=client_id,
            scope=scope,
            expires_at=now + self.device_expires_in,
            interval=self.device_interval,
            last_poll=now,
        )
        self._devices[device.device_code] = device
        return {
            "device_code": device.device_code,
            "user_code": device.user_code,
            "verification_uri": f"{web_url}/login/device",
            "expires_in": self.device_expires_in,
            "interval": device.interval,
        }

    def poll(self, client_id: str, device_code: str, grant_type: str) -> JSON:
        if client_id not in self.oauth_clients:
            return _incorrect_client()
        if grant_type != GRANT_TYPE:
            return _error("unsupported_grant_type", "The grant type is not supported.")
        device = self._devices.get(device_code)
        if device is None or device.client_id != client_id or device.state == "used":
            return _error("incorrect_device_code", "The device_code provided is not valid.")
        now = self.clock()
        if device.state == "expired" or now >= device.expires_at:
            device.state = "expired"
            return _error("expired_token", "The device code has expired.")
        if device.state == "denied":
            return _error("access_denied", "The authorization request was denied.")
        if device.state == "approved" and device.token is not None:
            device.state = "used"
            return {"access_token": device.token, "token_type": "bearer", "scope": device.scope}
        too_soon = now - device.last_poll < device.interval
        device.last_poll = now
        if too_soon:
            device.interval += 5  # as GitHub does: each slow_down adds 5 seconds
            answer = _error("slow_down", "Too many requests have been made in the same timeframe.")
            return {**answer, "interval": device.interval}
        return _error("authorization_pending", "The authorization request is still pending.")

    def _device_by_user_code(self, user_code: str) -> _Device:
        for device in self._devices.values():
            if device.user_code == user_code and device.state == "pending":
                return device
        raise KeyError(f"no pending device code with user code {user_code!r}")

    def approve(self, user_code: str, login: str) -> str:
        device = self._device_by_user_code(user_code)
        token = new_token("gho_")
        scopes = tuple(s for s in device.scope.replace(",", " ").split() if s)
        self.tokens[token] = Credential(login, scopes)
        device.state, device.token = "approved", token
        return token

    def deny(self, user_code: str) -> None:
        self._device_by_user_code(user_code).state = "denied"

    def expire(self, user_code: str) -> None:
        self._device_by_user_code(user_code).state = "expired"


def _error(code: str, description: str) -> JSON:
    return {
        "error": code,
        "error_description": description,
        "error_uri": "https://docs.github.com/developers/apps/authorizing-oauth-apps",
    }


def _incorrect_client() -> JSON:
    return _error("incorrect_client_credentials", "The client_id is not valid.")


def oauth_answer(request: web.Request, body: JSON) -> web.Response:
    """GitHub's web host answers form-encoded unless the client accepts JSON."""
    if "json" in request.headers.get("Accept", ""):
        return web.json_response(body)
    form = {k: str(v) for k, v in body.items()}
    return web.Response(text=urlencode(form), content_type="application/x-www-form-urlencoded")


def add_auth_routes(
    app: web.Application, credentials: Credentials, api: str, web_url: Callable[[], str]
) -> None:
    """The app routes under the API root `api` (a path prefix) and the web host's OAuth."""

    def field(request: web.Request, name: str) -> str:
        body = request.get(BODY)
        value = body.get(name) if isinstance(body, dict) else None
        return str(value if value is not None else request.query.get(name, ""))

    async def installation(request: web.Request) -> web.Response:
        gh_app = credentials.app(request)
        full_name = f"{request.match_info['owner']}/{request.match_info['repo']}"
        installation_id = credentials.installation_of(gh_app, full_name)
        return web.json_response(
            {
                "id": installation_id,
                "app_id": gh_app.app_id,
                "app_slug": gh_app.slug,
                "account": {"login": full_name.split("/")[0]},
                "target_type": "Organization",
            }
        )

    async def access_token(request: web.Request) -> web.Response:
        gh_app = credentials.app(request)
        minted = credentials.mint_installation_token(gh_app, int(request.match_info["id"]))
        return web.json_response(minted, status=201)

    async def this_app(request: web.Request) -> web.Response:
        gh_app = credentials.app(request)
        return web.json_response({"id": gh_app.app_id, "slug": gh_app.slug, "name": gh_app.slug})

    async def device_code(request: web.Request) -> web.Response:
        answer = credentials.device_code(
            field(request, "client_id"), field(request, "scope"), web_url()
        )
        return oauth_answer(request, answer)

    async def oauth_token(request: web.Request) -> web.Response:
        answer = credentials.poll(
            field(request, "client_id"), field(request, "device_code"), field(request, "grant_type")
        )
        return oauth_answer(request, answer)

    async def device_page(request: web.Request) -> web.Response:
        # Where a person would type the user code; a demo approves it with approve_device.
        return web.Response(text="<h1>Device activation</h1>", content_type="text/html")

    app.router.add_get(api + "/repos/{owner}/{repo}/installation", installation)
    app.router.add_post(api + r"/app/installations/{id:\d+}/access_tokens", access_token)
    app.router.add_get(api + "/app", this_app)
    app.router.add_post("/login/device/code", device_code)
    app.router.add_post("/login/oauth/access_token", oauth_token)
    app.router.add_get("/login/device", device_page)
