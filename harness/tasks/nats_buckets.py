"""The NATS task store's connection and where it keeps things on the server.

With prefix ``P`` (``store.prefix``, upper-cased, ``-`` as ``_``), several harnesses share one
server:

    P_TASKS       key-value: ``task.<slug>`` the task (task.json's bytes), ``summary.<slug>``
                  its listing line, ``thread.<hex>`` and ``agent.<hex>`` lookups to a slug,
                  ``run.<id>`` every run begun (until forgotten)
    P_TASK_RUNS   key-value, values expire: ``live.<id>`` a run's heartbeat
    P_TASK_LOGS   stream, subjects ``<prefix>.tasklog.<slug>.<hex name>``: log lines, a
                  batch per message
    P_TASK_FILES  object store: ``<slug>/<name>`` a task's text files (diffs)
    P_LEDGER      key-value: the bot's ledger, shared by its replicas (nats_ledger.py)
    P_LEASES      key-value: leases on the singletons (leases.py)
    P_MEMORY      key-value: the team's notes, ``scope.<hex scope>`` (harness/memory)

``nats-py`` is imported here and in the store only, when a NATS store is used.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.config.store_schema import StoreSettings
from harness.errors import HarnessError
from harness.nats_client import CONNECT_SECONDS, INSTALL_FIX, client_options, first_connect
from harness.waits import within

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.js.client import JetStreamContext
    from nats.js.kv import KeyValue
    from nats.js.object_store import ObjectStore

logger = logging.getLogger(__name__)

CONNECT_FIX = (
    "start nats-server with JetStream (`nats-server -js`), or fix `store.url` (or "
    "`runtime.url`) in config.yaml"
)
# Log lines go in messages of at most this many bytes: well under the server's default
# max_payload (1 MB), so a big batch is split rather than refused.
CHUNK_BYTES = 256 * 1024


def nats_failures() -> tuple[type[BaseException], ...]:
    """What a NATS call raises when the server cannot be reached or refuses."""
    import nats.errors

    return (nats.errors.Error, OSError, TimeoutError)


def unreachable(settings: StoreSettings, exc: BaseException) -> HarnessError:
    why = "no answer" if isinstance(exc, TimeoutError) else (str(exc) or type(exc).__name__)
    return HarnessError(
        f"the task store at NATS {settings.url} cannot be reached: {why}", fix=CONNECT_FIX
    )


@dataclass(frozen=True)
class Names:
    """The buckets, stream and subjects of one prefix."""

    prefix: str

    @property
    def _upper(self) -> str:
        return self.prefix.upper().replace("-", "_")

    @property
    def tasks(self) -> str:
        return f"{self._upper}_TASKS"

    @property
    def runs(self) -> str:
        return f"{self._upper}_TASK_RUNS"

    @property
    def logs(self) -> str:
        return f"{self._upper}_TASK_LOGS"

    @property
    def files(self) -> str:
        return f"{self._upper}_TASK_FILES"

    @property
    def ledger(self) -> str:
        return f"{self._upper}_LEDGER"

    @property
    def leases(self) -> str:
        return f"{self._upper}_LEASES"

    @property
    def memory(self) -> str:
        return f"{self._upper}_MEMORY"

    def log_subject(self, slug: str, name: str) -> str:
        # Hex: a file name's dots and slashes would be subject separators and wildcards.
        return f"{self.prefix}.tasklog.{slug}.{name.encode('utf-8').hex()}"

    def task_logs(self, slug: str) -> str:
        return f"{self.prefix}.tasklog.{slug}.>"


@dataclass(frozen=True)
class Buckets:
    """A connection with the store's buckets in place."""

    nc: Client
    js: JetStreamContext
    names: Names
    tasks: KeyValue
    runs: KeyValue
    files: ObjectStore

    async def close(self) -> None:
        if not self.nc.is_closed:
            try:
                await within(self.nc.close(), CONNECT_SECONDS)
            except nats_failures() as exc:  # cut off: nothing left to send
                logger.debug("closing the task store's NATS connection: %s", exc)


async def open_buckets(settings: StoreSettings, *, run_ttl: float) -> Buckets:
    """Connects to the store's server and makes its buckets (first use); a HarnessError
    naming the server and the fix when it cannot."""
    try:
        import nats
        from nats.aio.client import Client
    except ImportError as exc:
        raise HarnessError(
            "the NATS task store needs the nats-py package", fix=INSTALL_FIX
        ) from exc
    assert settings.url is not None  # the config refuses a NATS store without a server
    options = client_options(
        "harness task store",
        credentials=settings.credentials,
        tls_ca=settings.tls_ca,
        connect_timeout=CONNECT_SECONDS,
    )
    errors: list[BaseException] = []

    async def on_error(exc: Exception) -> None:
        errors.append(exc)
        logger.debug("task store NATS at %s: %s", settings.url, exc)

    nc = Client()
    try:
        return await first_connect(
            _connect(nc, settings, options, on_error, run_ttl), nc, CONNECT_SECONDS
        )
    except (nats.errors.Error, OSError, TimeoutError) as exc:
        raise unreachable(settings, errors[-1] if errors else exc) from exc


async def _connect(
    nc: Client, settings: StoreSettings, options: dict[str, Any], on_error: Any, run_ttl: float
) -> Buckets:
    from nats.js.api import KeyValueConfig, ObjectStoreConfig, StreamConfig
    from nats.js.errors import BadRequestError, BucketNotFoundError

    assert settings.url is not None
    await nc.connect(settings.url, error_cb=on_error, **options)
    js = nc.jetstream()
    names = Names(settings.prefix)

    async def kv(config: KeyValueConfig) -> KeyValue:
        try:
            return await js.key_value(config.bucket)
        except BucketNotFoundError:
            return await js.create_key_value(config)

    tasks = await kv(KeyValueConfig(bucket=names.tasks, history=1))
    # The heartbeats' age bound: a run whose process died drops out when its key expires.
    runs = await kv(KeyValueConfig(bucket=names.runs, history=1, ttl=run_ttl))
    try:
        await js.add_stream(StreamConfig(name=names.logs, subjects=[names.task_logs("*")]))
    except BadRequestError as exc:  # there already, with other limits of the operator's: kept
        logger.debug("stream %s: %s", names.logs, exc)
    try:
        files = await js.object_store(names.files)
    except BucketNotFoundError:
        files = await js.create_object_store(names.files, ObjectStoreConfig())
    return Buckets(nc, js, names, tasks, runs, files)
