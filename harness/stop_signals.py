"""SIGINT and SIGTERM, the signals that ask a running front end to stop, caught on the event
loop while a long operation runs: each one received is named, sets an event and calls what
the caller asked. Outside ``caught()``, the process's own handling is back (a second Ctrl-C
after the handlers are gone is not swallowed)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Iterator

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopSignals:
    """The stop signals received: ``received`` names them in order, ``stopped`` is set at
    the first one, and ``then`` runs at each."""

    def __init__(self, then: Callable[[], object] | None = None) -> None:
        self.received: list[str] = []
        self.stopped = asyncio.Event()
        self._then = then

    @contextlib.contextmanager
    def caught(self) -> Iterator[StopSignals]:
        """Catches SIGINT and SIGTERM on the running loop while entered."""
        loop = asyncio.get_running_loop()
        for signum in STOP_SIGNALS:
            loop.add_signal_handler(signum, self._on_signal, signum)
        try:
            yield self
        finally:
            for signum in STOP_SIGNALS:
                loop.remove_signal_handler(signum)

    def _on_signal(self, signum: int) -> None:
        self.received.append(signal.Signals(signum).name)
        self.stopped.set()
        if self._then is not None:
            self._then()
