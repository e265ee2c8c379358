"""config.yaml's ``store:`` section: where tasks are kept, ``file`` (the tasks folder) or
``nats`` (JetStream key-value buckets, streams and an object store on a NATS server, so every
machine with the config sees the same tasks)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field

from harness.config.runtime_schema import RuntimeSection
from harness.config.section import Section, resolve
from harness.problems import Invalid, NonEmptyStr

StoreKind = Literal["file", "nats"]


class StoreSection(Section):
    kind: StoreKind = Field(
        "file", examples=["nats"], description="`file` (the tasks folder) or `nats` (JetStream)"
    )
    url: NonEmptyStr | None = Field(
        None,
        examples=["nats://127.0.0.1:4222"],
        description="the NATS server, for `nats`; default: `runtime.url`",
    )
    credentials: NonEmptyStr | None = Field(
        None,
        examples=["nats.creds"],
        description="a NATS credentials file; default: `runtime.credentials` with its url",
    )
    tls_ca: NonEmptyStr | None = Field(
        None,
        alias="tlsCa",
        examples=["ca.pem"],
        description="the CA of the server's TLS cert; default: `runtime.tlsCa` with its url",
    )
    prefix: NonEmptyStr | None = Field(
        None,
        pattern=r"^[A-Za-z0-9_-]+$",
        examples=["harness"],
        description="bucket and stream prefix, one per installation; default: `runtime.prefix`",
    )


@dataclass(frozen=True)
class StoreSettings:
    """Where tasks are kept. For ``nats``: the server (``url``, ``credentials``, ``tls_ca``)
    and the ``prefix`` of the buckets and streams, so several harnesses share one server."""

    kind: StoreKind = "file"
    url: str | None = None
    credentials: Path | None = None
    tls_ca: Path | None = None
    prefix: str = "harness"


def check_store(store: StoreSection, runtime: RuntimeSection) -> None:
    """A NATS store needs a server: its own ``url`` or the runtime's."""
    if store.kind == "nats" and store.url is None and runtime.url is None:
        raise Invalid(
            "`kind: nats` needs a NATS server and neither `store.url` nor `runtime.url` names one",
            fix="add `url: nats://HOST:4222` under `store:` (or use `runtime: {kind: nats, url: "
            "...}`), or set `kind: file`",
            at=("store", "url"),
        )


def store_settings(base_dir: Path, raw: StoreSection, runtime: RuntimeSection) -> StoreSettings:
    """The store's settings; a NATS store without a url of its own takes the runtime's
    server with the runtime's credentials and CA. The server is kept for a file store too:
    ``harness store migrate --to nats`` copies to it."""
    own = raw.url is not None
    credentials = raw.credentials if own else (raw.credentials or runtime.credentials)
    tls_ca = raw.tls_ca if own else (raw.tls_ca or runtime.tls_ca)
    return StoreSettings(
        kind=raw.kind,
        url=raw.url if own else runtime.url,
        credentials=resolve(base_dir, credentials) if credentials else None,
        tls_ca=resolve(base_dir, tls_ca) if tls_ca else None,
        prefix=raw.prefix or runtime.prefix,
    )
