"""One NATS connection with the harness's JetStream streams in place, for both sides of the
wire protocol (``harness/runtime/wire.py``): the orchestrator's ``NatsHosting`` and ``harness
worker``. ``nats-py`` is imported here only, so installs that never use NATS never load it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import HarnessError
from harness.runtime.wire import Subjects

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.js.client import JetStreamContext

logger = logging.getLogger(__name__)

# Events of finished runs are kept a day: long enough for a bot restarted after an outage.
EVENTS_MAX_AGE_SECONDS = 24 * 3600


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
        self._closing: list[bool] = []

    @classmethod
    async def connect(
        cls,
        settings: NatsSettings,
        *,
        name: str,
        on_reconnect: Callable[[], Awaitable[None]] | None = None,
    ) -> NatsLink:
        """Connects (retrying while the server comes up) and makes sure the streams exist."""
        try:
            import nats
        except ImportError as exc:  # pragma: no cover - the extra is part of the test install
            raise HarnessError(
                "the NATS runtime needs the nats-py package",
                fix="pip install 'harness[nats]' (or nats-py) in the harness's environment",
            ) from exc
        options: dict[str, Any] = {
            "name": name,
            "max_reconnect_attempts": -1,
            "reconnect_time_wait": 0.5,
            "connect_timeout": 5,
            "allow_reconnect": True,
        }
        if settings.credentials is not None:
            options["user_credentials"] = str(settings.credentials)
        if settings.tls_ca is not None:
            import ssl

            options["tls"] = ssl.create_default_context(cafile=str(settings.tls_ca))
        if on_reconnect is not None:
            options["reconnected_cb"] = on_reconnect

        async def on_error(exc: Exception) -> None:
            logger.warning("NATS: %s", exc)

        closing: list[bool] = []  # set by close(): a disconnect then is no news

        async def on_disconnect() -> None:
            if not closing:
                logger.warning("NATS: disconnected from %s; reconnecting", settings.url)

        try:
            nc = await nats.connect(
                settings.url, error_cb=on_error, disconnected_cb=on_disconnect, **options
            )
        except (nats.errors.Error, OSError, TimeoutError) as exc:
            raise HarnessError(
                f"cannot connect to NATS at {settings.url}: {exc}",
                fix="start nats-server with JetStream (`nats-server -js`), or fix `runtime.url` "
                "in config.yaml / --nats",
            ) from exc
        link = cls(nc, nc.jetstream(), Subjects(settings.prefix))
        link._closing = closing
        await link.ensure_streams()
        return link

    async def ensure_streams(self) -> None:
        from nats.js.api import RetentionPolicy, StreamConfig
        from nats.js.errors import APIError

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
            except APIError as exc:  # an existing stream with other settings: keep it
                logger.debug("stream %s: %s", config.name, exc)

    async def close(self) -> None:
        self._closing.append(True)
        if not self.nc.is_closed:
            await self.nc.close()
