"""What one sandbox may hold of the harness through its egress proxy: connections open at
once and new ones a second. Past either, a connection is answered 429 at once and closed, so
a flood from inside cannot use up the harness's file descriptors or its loop; the log says
so once a burst, not once a connection."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from harness.clock import SYSTEM, Clock

logger = logging.getLogger(__name__)

HEAD_TIMEOUT = 10.0  # a client that connects and says nothing gives its place up soon
_WARNING_GAP = 10.0  # seconds: one warning a burst, and not more often than this


@dataclass(frozen=True)
class ProxyLimits:
    """Connections open at once; new ones a second on average (``rate``), with ``burst`` at
    once above it; how long a connection may take to send its request head."""

    connections: int = 32
    rate: float = 20.0
    burst: int = 64
    head_timeout: float = HEAD_TIMEOUT


class Gate:
    """Admits connections within ``limits`` (a token bucket for the rate); ``left`` when an
    admitted one ends. The bucket fills on ``clock``'s monotonic time."""

    def __init__(self, limits: ProxyLimits, name: str, clock: Clock = SYSTEM) -> None:
        self.limits = limits
        self._name = name
        self._clock = clock
        self._tokens, self._at = float(limits.burst), clock.monotonic()
        self.open = 0  # admitted and not yet ended
        self._refused = 0  # in the current burst
        self._warned_at: float | None = None

    def admit(self) -> bool:
        now = self._clock.monotonic()
        limits = self.limits
        self._tokens = min(limits.burst, self._tokens + (now - self._at) * limits.rate)
        self._at = now
        if self.open < limits.connections and self._tokens >= 1:
            self._tokens -= 1
            self.open += 1
            if self._refused:
                logger.info(
                    "sandbox proxy %s: the burst is over, %d refused", self._name, self._refused
                )
                self._refused = 0
            return True
        self._refused += 1
        if self._refused == 1 and (
            self._warned_at is None or now - self._warned_at >= _WARNING_GAP
        ):
            self._warned_at = now
            logger.warning(
                "sandbox proxy %s: too many connections from the sandbox (at most %d at once, "
                "%g a second): refusing with 429",
                self._name,
                limits.connections,
                limits.rate,
            )
        return False

    def left(self) -> None:
        self.open -= 1
