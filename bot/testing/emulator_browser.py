"""``harness bot --emulator`` as a person meets it: the command started as a real process and
its page opened in a real browser (Playwright driving Debian's chromium), for the tests and
``docs/screenshot.py``."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a test extra: loaded by whoever drives a browser
    from playwright.sync_api import Browser, Playwright

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
_READY = re.compile(r"open (http://127\.0\.0\.1:\d+/) in a browser")


def launch(playwright: Playwright) -> Browser:
    """Debian's chromium (``apt-get install -y chromium``; `make test` installs it), headless."""
    if not CHROMIUM.exists():
        raise FileNotFoundError(f"{CHROMIUM} is missing: apt-get install -y chromium")
    return playwright.chromium.launch(executable_path=str(CHROMIUM), args=list(CHROMIUM_ARGS))


class EmulatorProcess:
    """``harness bot --emulator --port 0`` running on ``config``: its page's ``url`` once it
    printed it, and everything it wrote (``output``)."""

    def __init__(
        self,
        proc: subprocess.Popen[str],
        url: str,
        lines: list[str],
        said: threading.Condition,
        ended: list[bool],
    ) -> None:
        self.proc = proc
        self.url = url
        self.lines = lines
        self._said = said
        self._ended = ended  # its output is all read

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for_output(self, text: str, timeout: float) -> str:
        """The first line it wrote holding ``text``, waiting (bounded) for it."""

        def found() -> str | None:
            return next((line for line in list(self.lines) if text in line), None)

        with self._said:
            if not self._said.wait_for(lambda: found() or self._ended, timeout):
                raise TimeoutError(f"no {text!r} within {timeout:g} s:\n{self.output}")
        line = found()
        if line is None:
            raise RuntimeError(f"it ended without writing {text!r}:\n{self.output}")
        return line


@contextlib.contextmanager
def emulator_process(
    config: Path, *, timeout: float = 60.0, env: dict[str, str] | None = None
) -> Iterator[EmulatorProcess]:
    """Starts the command, waits (bounded) for the line naming its page, and at the end stops
    it as a person does (SIGINT) and waits for it to exit."""
    command = [sys.executable, "-m", "harness", "bot", "--emulator", "--port", "0",
               "--config", str(config)]  # fmt: skip
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env if env is not None else dict(os.environ),
    )
    lines: list[str] = []
    said = threading.Condition()
    url: list[str] = []
    ended: list[bool] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            with said:
                lines.append(line)
                if not url and (match := _READY.search(line)):
                    url.append(match.group(1))
                said.notify_all()
        with said:
            ended.append(True)  # it ended, with or without the line
            said.notify_all()

    reader = threading.Thread(target=read, name="emulator-output", daemon=True)
    reader.start()
    try:
        with said:
            said.wait_for(lambda: url or ended, timeout)
        if not url:
            raise RuntimeError(f"no page address within {timeout:g} s:\n{''.join(lines)}")
        yield EmulatorProcess(proc, url[0], lines, said, ended)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        reader.join(timeout)
        if proc.stdout is not None:
            proc.stdout.close()
