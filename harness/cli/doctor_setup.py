"""The doctor's checks of what config.yaml's set-up uses beyond the machine: GitHub (each
repository's token accepted, the repository reachable with push access, the webhook secret
where ``on: github`` routines need it) and the MCP HTTP server's tokens. A set-up that uses
none of them gets none of these checks.

GitHub is asked with aiohttp directly, one ``GET /repos/OWNER/NAME`` per repository (free,
read-only); a classic token's scopes come back in ``x-oauth-scopes``."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.cli.doctor_check import Check
from harness.cli.doctor_http import call
from harness.config.forge_schema import GitHubRepository
from harness.config.mcp_server_schema import resolve_tokens
from harness.config.settings import Config
from harness.errors import ConfigError
from harness.forge.webhook import SECRET_ENV

GITHUB_TOKEN_FIX = (
    "make a token with the `repo` scope (classic) or Contents and Pull requests read/write "
    "(fine-grained) for {repo} at github.com/settings/tokens and export {env}=..."
)
# A classic token needs one of these for a private repository's pull requests.
_REPO_SCOPES = frozenset({"repo", "public_repo"})


def github_repositories(config: Config) -> list[tuple[str, GitHubRepository]]:
    """Each configured repository that opens pull requests on GitHub, by name."""
    return [
        (name, repo.github)
        for name, repo in sorted(config.workspaces.repositories.items())
        if repo.github is not None
    ]


async def check_github(config: Config, environ: Mapping[str, str]) -> list[Check]:
    """One check per GitHub repository, and the webhook secret where routines use it."""
    checks = await asyncio.gather(
        *(
            check_github_repository(name, repo, environ)
            for name, repo in github_repositories(config)
        )
    )
    found = list(checks)
    if any(routine.kind == "github" for routine in config.routines):
        found.append(webhook_secret_check(environ))
    return found


def webhook_secret_check(environ: Mapping[str, str]) -> Check:
    name = "GitHub webhook"
    if environ.get(SECRET_ENV, "").strip():
        return Check(name, "ok", f"{SECRET_ENV} set (routines `on: github` are delivered)")
    return Check(
        name,
        "fail",
        f"routines `on: github` need {SECRET_ENV}, which is not set",
        f"export {SECRET_ENV} with the secret set on the repository's webhook (Settings > "
        "Webhooks; payload URL https://BOT-HOST/github/webhook)",
    )


async def check_github_repository(
    name: str, repo: GitHubRepository, environ: Mapping[str, str]
) -> Check:
    label = f"GitHub {repo.full_name}"
    if repo.app is not None:
        return _app_key_check(label, repo)
    token = environ.get(repo.token_env, "").strip()
    fix = GITHUB_TOKEN_FIX.format(repo=repo.full_name, env=repo.token_env)
    if not token:
        return Check(
            label,
            "fail",
            f"{repo.token_env} is not set (workspaces.repositories.{name}.github)",
            fix,
        )
    url = f"{repo.api_url}/repos/{repo.full_name}"
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/vnd.github+json",
        "User-Agent": "harness-doctor",
    }
    answer = await call("GET", url, headers, check=label, json_when=(200,),
                        fix="check the network, or `github.apiUrl` in config.yaml")  # fmt: skip
    if isinstance(answer, Check):
        return answer
    status, scopes, body = answer.status, answer.headers.get("x-oauth-scopes"), answer.body
    return github_answer(label, repo, status, scopes, body)


def github_answer(
    label: str, repo: GitHubRepository, status: int, scopes: str | None, body: Any
) -> Check:
    """What GitHub's answer to ``GET /repos/OWNER/NAME`` says of the token. Pure."""
    fix = GITHUB_TOKEN_FIX.format(repo=repo.full_name, env=repo.token_env)
    if status == 401:
        return Check(label, "fail", f"GitHub refused {repo.token_env} (HTTP 401)", fix)
    if status in (403, 404):
        return Check(
            label,
            "fail",
            f"{repo.token_env} cannot see {repo.full_name} (HTTP {status})",
            f"check the name in config.yaml, and give the token access to it: {fix}",
        )
    if status != 200 or not isinstance(body, dict):
        return Check(label, "fail", f"GitHub answered HTTP {status}", "try again later")
    if scopes is not None:  # a classic token (fine-grained ones carry no scopes)
        granted = {scope.strip() for scope in scopes.split(",")}
        if not granted & _REPO_SCOPES:
            return Check(
                label,
                "fail",
                f"{repo.token_env} lacks the `repo` scope (has: {scopes or 'none'})",
                fix,
            )
    permissions = body.get("permissions")
    if isinstance(permissions, dict) and permissions.get("push") is False:
        return Check(
            label, "fail", f"{repo.token_env} may read {repo.full_name} but not push to it", fix
        )
    return Check(label, "ok", f"{repo.token_env} accepted, push access")


def _app_key_check(label: str, repo: GitHubRepository) -> Check:
    assert repo.app is not None
    key: Path = repo.app.private_key_file
    try:
        text = key.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return Check(
            label,
            "fail",
            f"cannot read the GitHub App's private key {key}: {exc}",
            "download the App's private key (the App's settings > Private keys) to that path",
        )
    if "PRIVATE KEY" not in text:
        return Check(label, "fail", f"{key} is not a PEM private key", "use the .pem GitHub gave")
    return Check(label, "ok", f"GitHub App {repo.app.app_id}, private key readable (not probed)")


def check_mcp_tokens(config: Config, environ: Mapping[str, str]) -> list[Check]:
    """The MCP HTTP server's tokens, when ``mcpServer.tokens`` lists any."""
    if not config.mcp_server.tokens:
        return []
    try:
        tokens = resolve_tokens(config.mcp_server, environ, file=config.file)
    except ConfigError as exc:
        return [Check("MCP tokens", "fail", f"{exc.field}: {exc.problem}", exc.fix)]
    return [Check("MCP tokens", "ok", f"{len(tokens)} token(s) for `harness mcp --transport http`")]
