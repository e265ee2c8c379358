"""Serving the bot: Socket Mode or HTTP (``POST /slack/events``), and a clean shutdown.

On SIGTERM/SIGINT the bot stops taking events, stops every agent through the orchestrator
(their dispatches end ``interrupted``, no ``claude`` process is left behind), lets the
threads hear about it, then closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Iterator
from typing import Any

import aiohttp
from aiohttp import web
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.app import HarnessBot, create_app
from bot.github_webhook import GITHUB_WEBHOOK_PATH, github_webhook
from bot.http_intake import HttpIntake
from bot.poster import slack_error
from bot.replica_forward import ThreadForwarder
from bot.replica_jobs import following_pull_requests, taking_over
from bot.routines import BotRoutines
from bot.settings import BotOptions, Mode, SlackEnv
from bot.singletons import Singletons
from bot.socket_intake import SocketIntake
from harness import health
from harness.agents.orchestrator import Orchestrator
from harness.clock import SYSTEM, Clock
from harness.errors import HarnessError
from harness.opening import Harness, open_harness
from harness.project import Project, open_leases
from harness.runtime.backends import runtime_backend
from harness.runtime.spec import AgentRuntime
from harness.stop_signals import StopSignals
from harness.tasks.leases import LeaseKeeper

logger = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
HEALTH_PATH = "/healthz"


class BotServer:
    def __init__(
        self,
        bot: HarnessBot,
        mode: Mode,
        *,
        app_token: str | None = None,
        host: str = "0.0.0.0",
        port: int = 3000,
        health_port: int | None = None,
    ) -> None:
        self.bot = bot
        self.mode = mode
        self.app_token = app_token
        self.host = host
        self.port = port
        # /healthz, /readyz, /metrics, GitHub's webhook and the routines' HTTP triggers on a
        # port of their own (None: not served; HTTP mode serves them next to /slack/events too).
        self.health_port = health_port
        self._health: web.AppRunner | None = None
        self.workspace = ""  # the Slack workspace's name, from auth.test at start
        self._runner: web.AppRunner | None = None
        self._socket: SocketIntake | None = None
        self._intake: HttpIntake | None = None
        self._forwarder: ThreadForwarder | None = None  # replicas: a thread's agent's holder
        self._stopped = False
        self.routines: BotRoutines | None = None  # config.yaml's routines, when it has some
        # The singletons, and the leases this replica holds on them (on NATS with a NATS
        # store, where every replica contends for them).
        self.singletons = Singletons(lease_keeper(bot.orchestrator))
        self.leases = self.singletons.keeper

    @property
    def url(self) -> str:
        """Where Slack posts events (HTTP mode)."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}{EVENTS_PATH}"

    async def start(self) -> None:
        await self._check_tokens()  # before the bot's first call to Slack
        await self.bot.start()
        self.singletons.add(following_pull_requests(self.bot))
        if self.bot.ledger.shared:  # replicas: one follows the agents of a stopped one
            self.singletons.add(taking_over(self.bot))
        self.routines = await BotRoutines.start(self.bot)
        if self.routines is not None:
            self.singletons.add(self.routines.singleton())
        self.singletons.metrics(self.bot.metrics)
        await self.singletons.start()
        # Replicas: what is said or pressed in a thread goes to the one holding its agent.
        forwarder = ThreadForwarder.for_replicas(self.bot.orchestrator, self.bot.ledger.shared,
            self.bot.conversations.poster.post)  # fmt: skip
        forward = forwarder.forward if forwarder is not None else None
        if self.mode == "http":
            self._intake = HttpIntake(self.bot.app, self.bot.signing_secret,
                self.bot.orchestrator.clock, forward)  # fmt: skip
            take = self._intake.take_letter
            web_app = web.Application()
            web_app.router.add_post(EVENTS_PATH, self._intake.handle)
            self._webhooks(web_app)
            health.add_routes(web_app, self.bot.metrics, self.checks(), self._leases_held)
            runner = web.AppRunner(web_app, access_log=None, shutdown_timeout=2.0)
            await runner.setup()
            try:
                await web.TCPSite(runner, self.host, self.port).start()
            except OSError:
                await runner.cleanup()
                raise
            self._runner = runner
            self.port = int(runner.addresses[0][1])
        else:
            if not self.app_token:
                raise HarnessError("Socket Mode needs SLACK_APP_TOKEN", fix="export it")
            handler = SocketIntake(self.bot.app, self.app_token, forward)
            self._socket = handler
            take = handler.take_letter
            await handler.connect_async()  # type: ignore[no-untyped-call]
        if forwarder is not None:
            self._forwarder = forwarder
            await forwarder.serve(take)
        if self.health_port is not None:
            # In HTTP mode too: a health check or a webhook set up for one mode keeps working
            # when the bot is switched to the other.
            self._health = await health.serve(self.bot.metrics, self.checks(),
                host=self.host, port=self.health_port, more=self._webhooks,
                held=self._leases_held)  # fmt: skip
            self.health_port = health.bound_port(self._health)

    def _leases_held(self) -> list[str]:
        """For /readyz: the leases this replica holds (none shown with one process's store,
        where every lease is its own)."""
        return self.leases.held() if self.bot.ledger.shared else []

    def _webhooks(self, app: web.Application) -> None:
        """GitHub's webhook, and the routines' HTTP triggers."""
        routines = self.routines
        hook = github_webhook(
            self.bot.orchestrator.pull_requests, routines.github if routines else None
        )
        app.router.add_post(GITHUB_WEBHOOK_PATH, hook)
        if routines is not None:
            routines.add_routes(app)

    def checks(self) -> dict[str, health.Check]:
        """What /readyz checks: Slack connected, the task store writable, and the agents'
        runtime reachable (NATS, when agents run on workers)."""
        orchestrator = self.bot.orchestrator

        async def slack() -> str | None:
            if self._stopped:
                return "stopping"
            if self._socket is not None:
                connected = await self._socket.client.is_connected()
                return None if connected else "Socket Mode not connected"
            return None if self._runner is not None else "not started"

        async def runtime() -> str | None:
            return orchestrator.runtime_problem()

        async def ledger() -> str | None:  # what the bot owes is held in memory meanwhile
            # Asked again after a refusal (the disk may have room now), and each time when
            # the ledger is on a server (NATS): whether this replica reaches it.
            late = None
            if self.bot.ledger.problem is not None or self.bot.ledger.file is None:
                with contextlib.suppress(HarnessError):
                    late = await health.bounded(self.bot.ledger.probe)
            problem = self.bot.ledger.problem or late
            if problem is None or self.bot.ledger.file is None:
                return problem
            volume = health.volume_of(orchestrator.config.tasks_dir)
            return f"{problem} (on the volume mounted at {volume})"

        return {
            "slack": slack,
            "task store": health.writable(orchestrator.config.tasks_dir),
            "ledger": ledger,
            "runtime": runtime,
        }

    async def _check_tokens(self) -> None:
        """Fails fast, with what to fix, when Slack refuses a token (slack_sdk's Socket Mode
        client would otherwise retry a refused app token forever)."""
        client = self.bot.client
        try:
            identity = await client.auth_test()
            self.workspace = str(identity.get("team") or identity.get("team_id") or "")
        except SlackApiError as exc:
            raise HarnessError(
                f"Slack refused SLACK_BOT_TOKEN: {slack_error(exc)}",
                fix="export SLACK_BOT_TOKEN=xoxb-... with the Bot User OAuth Token of the "
                "installed app (OAuth & Permissions in its settings at api.slack.com/apps; "
                "reinstalling the app changes it)",
            ) from exc
        except (SlackClientError, aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise HarnessError(
                f"cannot reach Slack at {client.base_url}: {type(exc).__name__}: {exc}",
                fix="check this machine's network, DNS and proxy (HTTPS_PROXY) can reach it; "
                "unset SLACK_API_URL unless you point the bot at a Slack emulator",
            ) from exc
        if self.mode != "socket":
            return
        try:
            await client.apps_connections_open(app_token=self.app_token or "")
        except SlackApiError as exc:
            raise HarnessError(
                f"Slack refused SLACK_APP_TOKEN: {slack_error(exc)}",
                fix="use an app-level token (xapp-...) with the connections:write scope, and "
                "turn Socket Mode on in the app's settings",
            ) from exc

    async def stop(self, reason: str = "the Slack bot shut down") -> None:
        """Idempotent: intake first, then the agents, then the bot's own work."""
        if self._stopped:
            return
        self._stopped = True
        with _named_if_slow("closing the Slack connection and the listeners"):
            if self._socket is not None:
                with contextlib.suppress(SlackClientError, OSError):
                    await self._socket.close_async()  # type: ignore[no-untyped-call]
            if self._runner is not None:
                await self._runner.cleanup()
            if self._health is not None:
                await self._health.cleanup()
        if self._intake is not None:
            with _named_if_slow("answering the events already acknowledged"):
                await self._intake.drain()  # events already acked are owed an answer
        with _named_if_slow("closing the replicas' forwarding, routines and singletons"):
            if self._forwarder is not None:
                await self._forwarder.close()
            if self.routines is not None:
                await self.routines.close()  # no firing starts once agents are being stopped
            await self.singletons.close()  # another replica takes the singletons at once
        self.bot.begin_shutdown()
        with _named_if_slow("stopping the agents"):
            # Agents on workers (a NATS runtime) go on; the bot's next start follows them.
            await self.bot.orchestrator.shutdown(reason, leave_remote_agents=True)
        with _named_if_slow("closing the bot's own work (its outbox and Slack client)"):
            await self.bot.close()


# A step of a stop that takes longer is named in the log while it goes on: a stop that hangs
# says where.
_SLOW_STOP_STEP = 10.0


@contextlib.contextmanager
def _named_if_slow(step: str) -> Iterator[None]:
    said = asyncio.get_running_loop().call_later(
        _SLOW_STOP_STEP, logger.warning, "stopping: still %s after %.0f s", step, _SLOW_STOP_STEP
    )
    try:
        yield
    finally:
        said.cancel()


def lease_keeper(orchestrator: Orchestrator) -> LeaseKeeper:
    """The leases of this process on the singletons, beside its task store."""
    config, clock = orchestrator.config, orchestrator.clock
    return LeaseKeeper(lambda: open_leases(config, clock), clock=clock)


def describe(server: BotServer, project: Project, runtime: str | None = None) -> str:
    """The start line: where it listens, the Slack workspace, the config, roles and where the
    agents run (``runtime``, default: where config.yaml says), so an operator sees at once
    which setup this process runs."""
    config = project.config
    where = f"HTTP mode, listening on {server.url}" if server.mode == "http" else "Socket Mode"
    runtime = runtime or runtime_backend(config.runtime).where
    sandbox = "" if config.sandbox.enabled else "; sandbox off"
    if server.health_port is not None:
        where += f", health, metrics and webhooks on port {server.health_port}"
    return (
        f"{where}, connected to Slack workspace {server.workspace or '(unnamed)'}; "
        f"config {config.file}, roles {', '.join(sorted(project.roles))}; "
        f"agents run {runtime}{sandbox}"
    )


async def _start(server: BotServer, stopped: asyncio.Future[Any]) -> bool:
    """Starts the server, unless a signal comes first (then False): a signal must work even
    while Slack is slow to answer."""
    starting = asyncio.ensure_future(server.start())
    await asyncio.wait({starting, stopped}, return_when=asyncio.FIRST_COMPLETED)
    if starting.done():
        starting.result()  # raises what start() raised
        return True
    starting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await starting
    return False


async def serve(
    project: Project,
    *,
    env: SlackEnv,
    mode: Mode,
    port: int = 3000,
    host: str = "0.0.0.0",
    runtime: AgentRuntime | None = None,
    options: BotOptions | None = None,
    health_port: int | None = None,
    clock: Clock = SYSTEM,
) -> int:
    """Runs the bot until SIGTERM or SIGINT; 0 after a clean shutdown. Its agents run where
    config.yaml says (on ``runtime`` here, when given), opened before the first event: the
    runtime is loaded (importing it at the first agent would hold every ack back) and the
    workers are connected (/readyz is ready only once agents can be sent to them). ``clock``:
    the time and ids of everything it builds (a test's clock moves it across a firing time)."""
    async with open_harness(project, purpose="serve", runtime=runtime, clock=clock) as harness:
        return await _serve(
            harness, project, env=env, mode=mode, port=port, host=host, options=options,
            health_port=health_port,
        )  # fmt: skip


async def _serve(
    harness: Harness,
    project: Project,
    *,
    env: SlackEnv,
    mode: Mode,
    port: int,
    host: str,
    options: BotOptions | None,
    health_port: int | None,
) -> int:
    orchestrator = harness.orchestrator
    recovered = await orchestrator.recover_interrupted()
    if recovered:
        print(
            f"harness bot: marked {len(recovered)} dispatch(es) of a stopped run interrupted",
            file=sys.stderr,
        )
    bot = create_app(orchestrator, env, options=options)
    bot.interrupted = recovered
    server = BotServer(
        bot, mode, app_token=env.app_token, host=host, port=port, health_port=health_port
    )
    signals = StopSignals()
    try:
        with signals.caught():
            stopped = asyncio.ensure_future(signals.stopped.wait())
            try:
                if await _start(server, stopped):
                    said = describe(server, project, harness.where)
                    print(f"harness bot: {said}", file=sys.stderr, flush=True)
                    await stopped
            except (SlackClientError, OSError) as exc:
                print(f"harness bot: could not start ({mode} mode): {exc}", file=sys.stderr)
                return 1
            finally:
                stopped.cancel()
        said = f"{signals.received[0]} received, stopping agents…"
        print(f"harness bot: {said}", file=sys.stderr, flush=True)
    finally:  # the handlers are gone by now: a second signal acts as it would anywhere
        why = ", ".join(signals.received) or "shutdown"
        await server.stop(f"the Slack bot was stopped ({why})")
    print("harness bot: stopped", file=sys.stderr, flush=True)
    return 0
