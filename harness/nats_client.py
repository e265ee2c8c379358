"""A NATS connection as the harness makes one (the runtime's link to its workers, the task
store's buckets): the options every connection uses, and its first connect bounded from
outside, since nats-py's own connect loop may swallow a cancellation. nats-py is an extra:
nothing here imports it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from harness.waits import cancel_surely, within

if TYPE_CHECKING:
    from nats.aio.client import Client

logger = logging.getLogger(__name__)

T = TypeVar("T")

# How long a first connect (and what is made on it) may take before it is given up.
CONNECT_SECONDS = 5.0
INSTALL_FIX = "pip install 'harness-slack-agents[nats]' (or nats-py) in the harness's environment"


def client_options(
    name: str, *, credentials: Path | None, tls_ca: Path | None, connect_timeout: float
) -> dict[str, Any]:
    """``Client.connect``'s options: named, reconnecting for ever every half second once
    connected, with the credentials file and the CA to trust, if any."""
    options: dict[str, Any] = {
        "name": name,
        "max_reconnect_attempts": -1,
        "reconnect_time_wait": 0.5,
        "connect_timeout": connect_timeout,
        "allow_reconnect": True,
    }
    if credentials is not None:
        options["user_credentials"] = str(credentials)
    if tls_ca is not None:
        import ssl

        options["tls"] = ssl.create_default_context(cafile=str(tls_ca))
    return options


async def first_connect(work: Awaitable[T], nc: Client, timeout: float) -> T:
    """``work`` (``nc``'s connect and what is made on it) within ``timeout`` seconds, else
    TimeoutError. When it fails, times out or is cancelled, ``nc`` is stopped from trying
    again before the error goes on: a client that never connected would retry for ever."""
    task = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait([task], timeout=timeout)
        if not done:
            raise TimeoutError
        return task.result()
    except BaseException:
        await cancel_surely(task)  # nats-py's connect loop may swallow a first cancellation
        try:
            await within(nc.close(), 2.0)
        except Exception as exc:  # noqa: BLE001 - closing a half-made client: nothing to save
            logger.debug("closing an unconnected NATS client: %s", exc)
        raise
