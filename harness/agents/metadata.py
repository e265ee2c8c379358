"""Per-agent metadata: shell commands run in the agent's cwd.

So that a listing answers in about one command's time rather than one per agent and field,
every field of every agent is collected in parallel, results are cached briefly per cwd, and
concurrent requests for the same cwd share one collection. A failing or slow command fills
that field's ``error`` and nothing else.

The folder is an agent's: each command runs confined (``harness.boundary.confined``: the
folder and the system read-only, no network, no secret), so a link, git config or nested
repository the agent left there gives the harness's own files, variables or network to
nothing. Where bubblewrap cannot run, or ``sandboxed`` is off (config's ``sandbox: off``),
commands run outside with a minimal environment and every git in them hardened
(``boundary.git.disarmed_env``), which a log line says once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.boundary.confined import confined_shell, confining
from harness.boundary.git import disarmed_env
from harness.clock import SYSTEM, Clock
from harness.config.settings import MetadataField
from harness.waits import within

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FieldValue:
    value: Any
    error: str | None


def parse_output(stdout: str) -> Any:
    """A command's output as a value: JSON when it parses (``810`` is a number), else text."""
    text = stdout.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


class MetadataCollector:
    def __init__(
        self,
        fields: Sequence[MetadataField],
        *,
        ttl_seconds: float = 5.0,
        sandboxed: bool = True,
        clock: Clock = SYSTEM,
    ) -> None:
        self.fields = tuple(fields)
        self.ttl_seconds = ttl_seconds  # of the clock's monotonic time
        self._clock = clock
        self.sandboxed = sandboxed
        self._said_unconfined = False
        self._cache: dict[Path, tuple[float, asyncio.Future[dict[str, FieldValue]]]] = {}

    async def collect(self, cwd: Path) -> dict[str, FieldValue]:
        if not self.fields:
            return {}
        now = self._clock.monotonic()
        cached = self._cache.get(cwd)
        if cached is not None and (not cached[1].done() or now - cached[0] < self.ttl_seconds):
            return await asyncio.shield(cached[1])
        future = asyncio.ensure_future(self._collect_now(cwd))
        self._cache[cwd] = (now, future)
        return await asyncio.shield(future)

    async def collect_many(self, cwds: Iterable[Path]) -> dict[Path, dict[str, FieldValue]]:
        unique = list(dict.fromkeys(cwds))
        values = await asyncio.gather(*(self.collect(c) for c in unique))
        return dict(zip(unique, values, strict=True))

    async def _collect_now(self, cwd: Path) -> dict[str, FieldValue]:
        bwrap = await confining() if self.sandboxed else None
        if bwrap is None and not self._said_unconfined:
            self._said_unconfined = True
            why = "bubblewrap cannot run here" if self.sandboxed else "the sandbox is off"
            logger.warning(
                "metadata commands run in agents' folders outside any sandbox (%s): "
                "minimal environment, git hardened; a folder's own config is still read",
                why,
            )
        values = await asyncio.gather(*(_run_field(f, cwd, bwrap) for f in self.fields))
        return {f.name: v for f, v in zip(self.fields, values, strict=True)}


async def _run_field(field: MetadataField, cwd: Path, bwrap: str | None) -> FieldValue:
    try:
        if bwrap is not None:
            args = await confined_shell(bwrap, cwd, field.command)
            where: Path | None = None  # the sandbox's own --chdir
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}  # bwrap's own: no secret
        else:
            args, where, env = ["/bin/sh", "-c", field.command], cwd, disarmed_env(cwd)
        proc = await asyncio.create_subprocess_exec(
            *args,
            cwd=where,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # so a timeout can kill the whole pipeline or sandbox
        )
    except OSError as exc:
        return FieldValue(None, f"Command {field.command!r} could not start: {exc}")
    try:
        out, err = await within(proc.communicate(), field.timeout_seconds)
    except TimeoutError:
        _kill_group(proc.pid)
        await proc.wait()
        return FieldValue(
            None, f"Command {field.command!r} timed out after {field.timeout_seconds:g} s"
        )
    if proc.returncode != 0:
        detail = err.decode("utf-8", "replace").strip().splitlines()
        reason = detail[-1] if detail else "no error output"
        return FieldValue(
            None, f"Command {field.command!r} failed (exit {proc.returncode}): {reason}"
        )
    return FieldValue(parse_output(out.decode("utf-8", "replace")), None)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        logger.debug("metadata command %s already gone", pid)
