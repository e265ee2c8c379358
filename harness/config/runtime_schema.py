"""config.yaml's ``runtime:`` section: where agents run, ``local`` (children of the harness)
or ``nats`` (``harness worker`` processes reached through a NATS server with JetStream)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Self

import pydantic
from pydantic import Field

from harness.config.section import Section, resolve
from harness.problems import NonEmptyStr


class RuntimeSection(Section):
    kind: Literal["local", "nats"] = Field(
        "local", examples=["nats"], description="`local` (this machine) or `nats` (workers)"
    )
    url: NonEmptyStr | None = Field(
        None, examples=["nats://127.0.0.1:4222"], description="the NATS server, for `nats`"
    )
    credentials: NonEmptyStr | None = Field(
        None, examples=["nats.creds"], description="a NATS credentials file (JWT and seed)"
    )
    tls_ca: NonEmptyStr | None = Field(
        None, alias="tlsCa", examples=["ca.pem"], description="the CA of the server's TLS cert"
    )
    prefix: NonEmptyStr = Field(
        "harness",
        pattern=r"^[A-Za-z0-9_-]+$",
        examples=["harness"],
        description="subject and stream prefix, one per installation",
    )
    lost_after_seconds: float = Field(
        10,
        alias="lostAfterSeconds",
        gt=0,
        examples=[10],
        description="a worker silent this long is lost; its agent ends interrupted",
    )

    @pydantic.model_validator(mode="after")
    def _nats_has_a_url(self) -> Self:
        if self.kind == "nats" and self.url is None:
            raise ValueError("`kind: nats` needs the server's `url`, e.g. nats://127.0.0.1:4222")
        return self


@dataclass(frozen=True)
class RuntimeSettings:
    """Where agents run: ``local`` (children of this process) or ``nats`` (``harness worker``
    processes reached through a NATS server with JetStream)."""

    kind: Literal["local", "nats"] = "local"
    url: str | None = None
    credentials: Path | None = None  # a NATS .creds file
    tls_ca: Path | None = None  # the CA of the server's TLS certificate
    prefix: str = "harness"  # subjects and streams; one prefix per harness installation
    lost_after_seconds: float = 10.0  # a worker silent this long is lost


def runtime_settings(base_dir: Path, raw: RuntimeSection) -> RuntimeSettings:
    return RuntimeSettings(
        kind=raw.kind,
        url=raw.url,
        credentials=resolve(base_dir, raw.credentials) if raw.credentials else None,
        tls_ca=resolve(base_dir, raw.tls_ca) if raw.tls_ca else None,
        prefix=raw.prefix,
        lost_after_seconds=float(raw.lost_after_seconds),
    )
