"""``harness doctor``: is this set-up ready to run the harness? One line per check (✓ ok,
- a part this set-up does not use, ! a warning that does not fail, ✗ a failure with a
``fix:`` line under it); exit code 1 on any failure, for scripts. It checks what the set-up
uses and nothing else: a terminal-only or MCP-only set-up passes without Slack.

Each check is a small coroutine returning a ``Check``; they run concurrently, each bounded,
so a server that does not answer never hangs the doctor. The Slack check talks to the Web
API with aiohttp directly (harness/ never imports the Slack SDK).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import shutil
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path

import yaml

from harness import health
from harness.cli.doctor_check import NETWORK_SECONDS, Check, exit_code, render
from harness.cli.doctor_http import call
from harness.cli.doctor_setup import check_github, check_mcp_tokens
from harness.cli.scaffold import DEFAULTS
from harness.config import RuntimeSettings
from harness.config.settings import Config
from harness.errors import HarnessError
from harness.project import default_config_path, load_project
from harness.runtime.backends import RuntimeBackend, runtime_backend
from harness.runtime.model_access import model_access
from harness.waits import within

CHECK_SECONDS = 20.0  # any one check, all told (the sandbox probe starts a process)
FAIL_BELOW_BYTES = 500 * 1024**2
WARN_BELOW_BYTES = 2 * 1024**3
FULL_BELOW_BYTES = 1024**2
SLACK_API_URL = "https://slack.com/api/"
ANTHROPIC_API_URL = "https://api.anthropic.com"
SLACK_FIX = (
    "create the Slack app from manifest.yml (api.slack.com/apps > Create New App > From an "
    "app manifest), install it, and export SLACK_BOT_TOKEN=xoxb-... (README: Running the "
    "Slack bot)"
)
MODE_FIX = (
    "for Socket Mode create an app-level token with connections:write (Basic Information > "
    "App-Level Tokens) and export SLACK_APP_TOKEN=xapp-...; for HTTP mode export "
    "SLACK_SIGNING_SECRET (Basic Information > Signing Secret)"
)
# Any of them set: this machine runs the Slack bot, and its Slack set-up is checked.
SLACK_VARIABLES = ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET")
SANDBOX_OFF = "agents run without the OS sandbox (`sandbox: off`)"


def main(args: argparse.Namespace) -> int:
    named: Path | None = getattr(args, "config", None)
    config_path = named or default_config_path()
    nats = os.environ.get("HARNESS_NATS_URL", "").strip()
    if named is None and nats and not config_path.exists():  # a worker's machine
        checks = asyncio.run(run_worker_checks(nats, os.environ, Path.home()))
    else:
        slack = True if getattr(args, "slack", False) else None
        checks = asyncio.run(run_checks(config_path, os.environ, Path.home(), slack=slack))
    print(render(checks))
    return exit_code(checks)


# `harness worker`'s default --workspaces, where a worker's disk space is checked.
WORKER_WORKSPACES = Path(".agents/worker-workspaces")


async def run_worker_checks(nats_url: str, environ: Mapping[str, str], home: Path) -> list[Check]:
    """What `harness worker` needs (no config.yaml, no Slack): model access, git, the sandbox,
    the NATS server at ``nats_url`` with its client, free space for the workspaces."""
    backend = runtime_backend(RuntimeSettings(kind="nats", url=nats_url))
    skipped = Check(
        "config",
        "skip",
        "not needed on a worker ($HARNESS_NATS_URL set, no config.yaml): `harness worker` "
        "takes its settings from its options",
    )
    work: list[tuple[str, Callable[[], Awaitable[list[Check] | Check]]]] = [
        ("model", lambda: check_model(environ, home, None)),
        ("git", check_git),
        ("sandbox", lambda: check_sandbox(None)),
        (backend.name, lambda: check_runtime(backend)),
        ("disk", lambda: check_worker_disk(WORKER_WORKSPACES.absolute())),
    ]
    results = await asyncio.gather(*(_bounded_checks(name, make) for name, make in work))
    return [skipped, *(check for result in results for check in result)]


async def check_worker_disk(workspaces: Path) -> Check:
    said = await check_disk(workspaces)
    fix = "free space on that disk, or pass `harness worker --workspaces DIR` on another one"
    return said if said.status == "ok" else dataclasses.replace(said, fix=fix)


async def run_checks(
    config_path: Path, environ: Mapping[str, str], home: Path, *, slack: bool | None = None
) -> list[Check]:
    """The checks of what this set-up uses, in a fixed order, run concurrently. Slack is
    checked where ``slack`` says, else where a Slack variable is set (a terminal-only or
    MCP-only set-up sets none); GitHub for the repositories that open pull requests there;
    the MCP HTTP server's tokens when config lists any; NATS with ``runtime: nats``."""
    config_check, config = await _bounded("config", lambda: check_config(config_path))
    uses_slack = (
        slack
        if slack is not None
        else any(environ.get(name, "").strip() for name in SLACK_VARIABLES)
    )
    slack_checks: Callable[[], Awaitable[list[Check] | Check]] = (
        (lambda: check_slack(environ)) if uses_slack else _no_slack
    )
    work: list[tuple[str, Callable[[], Awaitable[list[Check] | Check]]]] = [
        ("Slack", slack_checks),
        ("model", lambda: check_model(environ, home, config)),
        ("git", check_git),
        ("sandbox", lambda: check_sandbox(config)),
    ]
    backend = runtime_backend(config.runtime) if config is not None else None
    if backend is not None and not backend.agents_here:  # the agents run behind a server
        reached = backend
        work.append((reached.name, lambda: check_runtime(reached)))
    if config is not None:
        tasks_dir, used = config.tasks_dir, config
        work.append(("GitHub", lambda: check_github(used, environ)))
        work.append(("MCP tokens", lambda: _now(check_mcp_tokens(used, environ))))
        work.append(("disk", lambda: check_disk(tasks_dir)))
    results = await asyncio.gather(*(_bounded_checks(name, make) for name, make in work))
    checks = [config_check]
    for result in results:
        checks.extend(result)
    return checks


async def _bounded_checks(
    name: str, make: Callable[[], Awaitable[list[Check] | Check]]
) -> list[Check]:
    try:
        result = await within(make(), CHECK_SECONDS)
    except TimeoutError:
        return [Check(name, "fail", f"no answer within {CHECK_SECONDS:g} s")]
    except Exception as exc:  # noqa: BLE001 - a check that broke is a failed check, said
        return [Check(name, "fail", f"{type(exc).__name__}: {exc}")]
    return result if isinstance(result, list) else [result]


async def _bounded(
    name: str, make: Callable[[], Awaitable[tuple[Check, Config | None]]]
) -> tuple[Check, Config | None]:
    try:
        return await within(make(), CHECK_SECONDS)
    except TimeoutError:
        return Check(name, "fail", f"no answer within {CHECK_SECONDS:g} s"), None


async def _now(checks: list[Check]) -> list[Check]:
    return checks


async def _no_slack() -> Check:
    return Check(
        "Slack",
        "skip",
        "not set up here (no SLACK_BOT_TOKEN, SLACK_APP_TOKEN or SLACK_SIGNING_SECRET): the "
        "terminal and MCP only; `harness doctor --slack` checks a Slack set-up",
    )


# ---------------------------------------------------------------------------- the checks


async def check_config(config_path: Path) -> tuple[Check, Config | None]:
    try:
        project = await asyncio.to_thread(load_project, config_path)
    except HarnessError as exc:
        return Check("config", "fail", _without_fix(exc), exc.fix), None
    roles = ", ".join(sorted(project.roles))
    return Check("config", "ok", f"{config_path} loads, roles: {roles}"), project.config


def _without_fix(exc: HarnessError) -> str:
    """The error's text without its fix line (kept for ``Check.fix``): its message and any
    further problems it lists."""
    return str(exc).replace(f"\n  fix: {exc.fix}", "", 1)


async def check_slack(environ: Mapping[str, str]) -> list[Check]:
    """The bot token (``auth.test``), the scopes it was granted against manifest.yml's, and
    the token or secret the connection mode needs."""
    checks: list[Check] = []
    token = environ.get("SLACK_BOT_TOKEN", "").strip()
    if not token:
        checks.append(Check("Slack bot token", "fail", "SLACK_BOT_TOKEN is not set", SLACK_FIX))
    else:
        checks.extend(await _auth_test(token, environ.get("SLACK_API_URL") or SLACK_API_URL))
    checks.append(connection_mode(environ))
    return checks


async def _auth_test(token: str, api_url: str) -> list[Check]:
    url = api_url.rstrip("/") + "/auth.test"
    name = "Slack bot token"
    answer = await call(
        "POST", url, {"Authorization": f"Bearer {token}"}, check=name, json_when=(),
        fix="check the network (or unset SLACK_API_URL unless it points at a Slack emulator)",
    )  # fmt: skip
    if isinstance(answer, Check):
        return [answer]
    body, scopes_header = answer.body, answer.headers.get("x-oauth-scopes")
    if not isinstance(body, dict) or not body.get("ok"):
        error = body.get("error", "no answer") if isinstance(body, dict) else "not JSON"
        return [
            Check(
                name,
                "fail",
                f"Slack refused SLACK_BOT_TOKEN: {error}",
                "copy the Bot User OAuth Token (xoxb-...) from the app's Install App page "
                "into SLACK_BOT_TOKEN (reinstall the app if it was revoked)",
            )
        ]
    team, user = body.get("team", "?"), body.get("user", "?")
    checks = [Check(name, "ok", f"team {team}, bot user @{user} ({body.get('user_id', '?')})")]
    wanted = await asyncio.to_thread(manifest_scopes)
    if wanted is not None:
        checks.append(scope_check(wanted, scopes_header))
    return checks


def scope_check(wanted: Sequence[str], granted_header: str | None) -> Check:
    """The manifest's bot scopes against those Slack says the token has."""
    name = "Slack scopes"
    if granted_header is None:
        return Check(name, "warn", "Slack did not say which scopes the token has")
    granted = {scope.strip() for scope in granted_header.split(",") if scope.strip()}
    missing = [scope for scope in wanted if scope not in granted]
    if missing:
        return Check(
            name,
            "fail",
            f"missing {', '.join(missing)}",
            "add them under OAuth & Permissions > Bot Token Scopes (or paste manifest.yml "
            "into the app's manifest) and reinstall the app",
        )
    return Check(name, "ok", f"all {len(wanted)} bot scopes of manifest.yml granted")


def manifest_scopes() -> list[str] | None:
    """manifest.yml's bot scopes, as the package ships it with its defaults (in a checkout,
    a link to the repository's own); None when it cannot be read (the scopes are then not
    compared)."""
    try:
        text = (DEFAULTS / "manifest.yml").read_text(encoding="utf-8")
    except OSError:
        return None
    try:
        scopes = yaml.safe_load(text)["oauth_config"]["scopes"]["bot"]
    except (yaml.YAMLError, KeyError, TypeError):
        return None
    return [str(scope) for scope in scopes] if isinstance(scopes, list) else None


def connection_mode(environ: Mapping[str, str]) -> Check:
    name = "Slack connection"
    app_token = environ.get("SLACK_APP_TOKEN", "").strip()
    if app_token:
        if app_token.startswith("xapp-"):
            return Check(name, "ok", "Socket Mode (SLACK_APP_TOKEN)")
        return Check(name, "fail", "SLACK_APP_TOKEN is not an app-level token (xapp-...)", MODE_FIX)
    if environ.get("SLACK_SIGNING_SECRET", "").strip():
        return Check(name, "ok", "HTTP mode (SLACK_SIGNING_SECRET)")
    return Check(name, "fail", "neither SLACK_APP_TOKEN nor SLACK_SIGNING_SECRET is set", MODE_FIX)


async def check_model(environ: Mapping[str, str], home: Path, config: Config | None) -> Check:
    """A way to reach a model; with a key or a gateway, at most a GET of ``/v1/models``
    (free): never a paid call."""
    name = "model access"
    access = model_access(environ, home)
    if access is None:
        backend = runtime_backend(config.runtime) if config is not None else None
        if backend is not None and not backend.agents_here:
            return Check(
                name, "warn", f"none on this machine; the {backend.name} workers' machines need it"
            )
        return Check(
            name,
            "fail",
            "no ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, CLAUDE_CODE_OAUTH_TOKEN, "
            "ANTHROPIC_BASE_URL nor Claude Code login",
            "export ANTHROPIC_API_KEY=sk-ant-... (or ANTHROPIC_AUTH_TOKEN, "
            "CLAUDE_CODE_OAUTH_TOKEN, ANTHROPIC_BASE_URL for a gateway)",
        )
    headers: dict[str, str] = {"anthropic-version": "2023-06-01"}
    if key := environ.get("ANTHROPIC_API_KEY", "").strip():
        headers["x-api-key"] = key
    elif token := environ.get("ANTHROPIC_AUTH_TOKEN", "").strip():
        headers["Authorization"] = f"Bearer {token}"
    base = environ.get("ANTHROPIC_BASE_URL", "").strip()
    if len(headers) == 1 and not base:  # an OAuth token, a cloud provider, a login: not probed
        return Check(name, "ok", f"through {access} (not probed)")
    url = (base or ANTHROPIC_API_URL).rstrip("/") + "/v1/models"
    answer = await call("GET", url, headers, check=name,
                        fix="check the network, or ANTHROPIC_BASE_URL")  # fmt: skip
    if isinstance(answer, Check):
        return answer
    status = answer.status
    if status in (401, 403):
        return Check(
            name,
            "fail",
            f"the key was refused (HTTP {status} from {url})",
            "export a valid key (console.anthropic.com > API Keys)",
        )
    if status == 404:
        return Check(name, "ok", f"{access}; {url} reachable (no model list there)")
    if status >= 400:
        return Check(name, "warn", f"{access}; {url} answered HTTP {status}")
    return Check(name, "ok", f"{access}; accepted by {url}")


async def check_git() -> Check:
    try:
        process = await asyncio.create_subprocess_exec(
            "git",
            "--version",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
    except OSError:
        return Check("git", "fail", "git is not installed", "install git (e.g. apt install git)")
    try:
        out, _ = await within(process.communicate(), NETWORK_SECONDS)
    except TimeoutError:
        process.kill()
        await process.wait()
        return Check("git", "fail", "`git --version` did not answer", "check the git install")
    if process.returncode != 0:
        return Check("git", "fail", "`git --version` failed", "reinstall git")
    return Check("git", "ok", out.decode(errors="replace").strip())


async def check_sandbox(config: Config | None) -> Check:
    from harness.sandbox.runner import check_sandbox as probe

    if config is not None and not config.sandbox.enabled:
        return Check("sandbox", "warn", SANDBOX_OFF)
    try:
        await probe()
    except HarnessError as exc:
        return Check("sandbox", "fail", exc.message, exc.fix)
    return Check("sandbox", "ok", "bubblewrap works")


async def check_runtime(backend: RuntimeBackend) -> Check:
    """Where the agents run reached (its client installed, its server answering)."""
    try:
        reached = await backend.probe(timeout=NETWORK_SECONDS, client="harness-doctor")
    except HarnessError as exc:
        return Check(backend.name, "fail", exc.message, exc.fix)
    return Check(backend.name, "ok", reached)


async def check_disk(tasks_dir: Path) -> Check:
    free = await asyncio.to_thread(_free_bytes, tasks_dir)
    return disk_check(tasks_dir, free, volume=health.volume_of(tasks_dir))


def _free_bytes(tasks_dir: Path) -> int:
    folder = tasks_dir
    while not folder.exists() and folder.parent != folder:  # created on first use
        folder = folder.parent
    return shutil.disk_usage(folder).free


def disk_check(tasks_dir: Path, free: int, volume: Path | None = None) -> Check:
    name = "disk space"
    said = f"{_size(free)} free for {tasks_dir}"
    if volume is not None and free < FULL_BELOW_BYTES:  # the bot's ledger stops taking writes
        said = f"the volume mounted at {volume} is full: {said}"
    elif volume is not None and free < FAIL_BELOW_BYTES:
        said += f" (the volume mounted at {volume})"
    fix = "free space on that disk, or point `tasks:` in config.yaml to another one"
    if free < FAIL_BELOW_BYTES:
        return Check(name, "fail", said, fix)
    if free < WARN_BELOW_BYTES:
        return Check(name, "warn", said, fix)
    return Check(name, "ok", said)


def _size(free: int) -> str:
    if free >= 1024**3:
        return f"{free / 1024**3:.1f} GB"
    return f"{free / 1024**2:.0f} MB"
