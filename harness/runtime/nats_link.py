"""One NATS connection with the harness's JetStream streams in place, for both sides of the
wire protocol (``harness/runtime/wire.py``): the orchestrator's ``NatsHosting`` and ``harness
worker``. ``nats-py`` is imported here only, so installs that never use NATS never load it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import HarnessError
from harness.nats_client import CONNECT_SECONDS, INSTALL_FIX, client_options, first_connect
from harness.runtime.spec import RunOutcome
from harness.runtime.wire import Event, Subjects, outcome_from_json
from harness.waits import within

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.js.client import JetStreamContext
    from nats.js.kv import KeyValue

logger = logging.getLogger(__name__)

# Events of finished runs are kept a day: long enough for a bot restarted after an outage.
EVENTS_MAX_AGE_SECONDS = 24 * 3600
CONNECT_FIX = (
    "start nats-server with JetStream (`nats-server -js`), or fix `runtime.url` in "
    "config.yaml / --nats"
)


def require_nats() -> None:
    """Raises the one-line HarnessError of an install without nats-py (the ``nats`` extra),
    before anything is made that would need it."""
    try:
        import nats  # noqa: F401
    except ImportError as exc:
        raise HarnessError("the NATS runtime needs the nats-py package", fix=INSTALL_FIX) from exc


def nats_errors() -> tuple[type[BaseException], ...]:
    """What a NATS call raises when the server or the other side is not there (for
    ``except nats_errors():``; nats-py is imported only when a NATS call failed)."""
    import nats.errors

    return (nats.errors.Error, OSError, TimeoutError)


@dataclass(frozen=True)
class NatsSettings:
    """Where the NATS server is and how to reach it (``runtime:`` in config.yaml)."""

    url: str
    credentials: Path | None = None  # a .creds file (JWT + nkey seed)
    tls_ca: Path | None = None  # the CA that signed the server's certificate
    prefix: str = "harness"


class NatsLink:
    def __init__(self, nc: Client, js: JetStreamContext, subjects: Subjects) -> None:
        self.nc = nc
        self.js = js
        self.subjects = subjects
        self.url = ""
        self._closing: list[bool] = []
        loop = asyncio.get_running_loop()
        self._clock = loop.time
        # Since when this side is connected, or (None) since when it is cut off from NATS.
        self.up_since: float | None = loop.time()
        self.down_since: float | None = None

    @property
    def connected(self) -> bool:
        return self.down_since is None and self.nc.is_connected

    def _went_down(self) -> None:
        if self.down_since is None:
            self.down_since, self.up_since = self._clock(), None

    def _came_back(self) -> None:
        self.down_since, self.up_since = None, self._clock()

    @classmethod
    async def connect(
        cls,
        settings: NatsSettings,
        *,
        name: str,
        on_reconnect: Callable[[], Awaitable[None]] | None = None,
        timeout: float = CONNECT_SECONDS,
    ) -> NatsLink:
        """Connects and makes sure the streams exist, in ``timeout`` seconds at most (a
        HarnessError naming the URL and the fix otherwise); reconnects for ever afterwards."""
        require_nats()
        import nats.errors
        from nats.aio.client import Client

        options = client_options(
            name,
            credentials=settings.credentials,
            tls_ca=settings.tls_ca,
            connect_timeout=min(timeout, CONNECT_SECONDS),
        )

        holder: list[NatsLink] = []  # the link, once made (the callbacks need it)
        errors: list[BaseException] = []  # while connecting: the last says why it fails

        async def on_error(exc: Exception) -> None:
            if not holder:
                errors.append(exc)
            if not holder or holder[0].down_since is not None:  # each try: said once above
                logger.debug("NATS at %s: %s", settings.url, exc)
            else:
                logger.warning("NATS: %s", exc)

        async def on_disconnect() -> None:
            if holder and not holder[0]._closing:
                holder[0]._went_down()
                logger.warning("NATS: disconnected from %s; reconnecting", settings.url)

        async def on_reconnected() -> None:
            if holder:
                holder[0]._came_back()
                logger.warning("NATS: reconnected to %s", settings.url)
            if on_reconnect is not None:
                await on_reconnect()

        nc = Client()

        async def connect_and_prepare() -> NatsLink:
            await nc.connect(
                settings.url,
                error_cb=on_error,
                disconnected_cb=on_disconnect,
                reconnected_cb=on_reconnected,
                **options,
            )
            link = cls(nc, nc.jetstream(), Subjects(settings.prefix))
            link.url = settings.url
            holder.append(link)
            await link.ensure_streams()
            return link

        try:
            return await first_connect(connect_and_prepare(), nc, timeout)
        except (nats.errors.Error, OSError, TimeoutError) as exc:
            why = errors[-1] if errors else exc
            raise HarnessError(
                f"cannot connect to NATS at {settings.url} within {timeout:g} s: {_describe(why)}",
                fix=CONNECT_FIX,
            ) from exc

    async def ensure_streams(self) -> None:
        from nats.js.api import RetentionPolicy, StreamConfig
        from nats.js.errors import APIError, ServiceUnavailableError

        s = self.subjects
        streams = [
            StreamConfig(
                name=s.runs_stream, subjects=[s.all_runs], retention=RetentionPolicy.WORK_QUEUE
            ),
            StreamConfig(
                name=s.events_stream,
                subjects=[s.all_events],
                retention=RetentionPolicy.LIMITS,
                max_age=EVENTS_MAX_AGE_SECONDS,
            ),
        ]
        for config in streams:
            try:
                await self.js.add_stream(config)
            except ServiceUnavailableError as exc:  # JetStream is off on that server
                raise HarnessError(
                    f"the NATS server at {self.url} has no JetStream: {exc}", fix=CONNECT_FIX
                ) from exc
            except APIError as exc:  # an existing stream with other settings: keep it
                logger.debug("stream %s: %s", config.name, exc)

    async def stored_outcome(self, agent_id: str) -> RunOutcome | None:
        """The run's outcome as its worker stored it in JetStream (its last event), if it
        reported one; None too while NATS cannot be asked."""
        s = self.subjects
        with contextlib.suppress(*nats_errors(), ValueError, KeyError, TypeError):
            last = await self.js.get_last_msg(s.events_stream, s.events(agent_id))
            if last.data is not None:
                event = Event.decode(last.data)
                if event.kind == "outcome":
                    return outcome_from_json(event.data)
        return None

    async def spares_bucket(self) -> KeyValue:
        """The key-value bucket of the spares workers keep (made on first use)."""
        from nats.js.api import KeyValueConfig
        from nats.js.errors import BucketNotFoundError

        name = self.subjects.spares_bucket
        try:
            return await self.js.key_value(name)
        except BucketNotFoundError:
            return await self.js.create_key_value(KeyValueConfig(bucket=name, history=1))

    async def close(self) -> None:
        """Closes the connection, within a few seconds, whether NATS is there or not."""
        self._closing.append(True)
        if not self.nc.is_closed:
            try:
                await within(self.nc.close(), CONNECT_SECONDS)
            except nats_errors() as exc:  # cut off: what it had to send is lost anyway
                logger.debug("closing the NATS connection to %s: %s", self.url, exc)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "no answer"
    return str(exc) or type(exc).__name__
