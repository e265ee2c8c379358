"""A time-limited memory of what was seen: Slack delivers at least once."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable


class TtlSet:
    """``add(key)`` is True the first time a key is seen within ``ttl`` seconds."""

    def __init__(
        self,
        ttl: float,
        *,
        max_size: int = 50_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl = ttl
        self.max_size = max_size
        self._clock = clock
        self._seen: OrderedDict[Hashable, float] = OrderedDict()

    def add(self, key: Hashable) -> bool:
        now = self._clock()
        self._expire(now)
        if key in self._seen:
            return False
        self._seen[key] = now
        while len(self._seen) > self.max_size:
            self._seen.popitem(last=False)
        return True

    def __contains__(self, key: Hashable) -> bool:
        self._expire(self._clock())
        return key in self._seen

    def _expire(self, now: float) -> None:
        while self._seen:
            key, seen_at = next(iter(self._seen.items()))
            if now - seen_at < self.ttl:
                return
            del self._seen[key]
