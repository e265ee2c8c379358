"""Run locks: whether the harness process that started a dispatch is still there, without
trusting pids.

Each harness process that runs agents *begins a run*: a random run id and a lock file
``<tasks dir>/.runs/<run id>.lock`` that it holds with ``flock(LOCK_EX)`` on a descriptor kept
open for the life of the process. The kernel lets go of the lock when the process ends, however
it ends (SIGKILL included), and the descriptor is close-on-exec, so the agents' ``claude``
children never hold it. A pid says nothing once the container restarts the harness as pid 1
again, or the pid is reused; the lock does.

Anyone can then ask whether a run is alive: a fresh ``open`` and ``flock(LOCK_SH | LOCK_NB)``
fails exactly while the run's process holds its lock. A shared probe (not an exclusive one) so
that two processes checking at once never mistake each other for the run. A lock file whose
lock is free is an *ended* run: the file stays until someone has cleaned up after the run
(killed what it left running) and ``forget_run`` removes it.

Blocking file work: the task store calls these from worker threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import re
import threading
from pathlib import Path

from harness.clock import Clock

logger = logging.getLogger(__name__)

RUNS_FOLDER = ".runs"
RUN_ID_BYTES = 8  # 16 hex digits
_RUN_ID_RE = re.compile(r"^[0-9a-f]{8,64}$")
_SUFFIX = ".lock"
_TAKEN = ".taken"  # <run>.<agent>.taken: the agent a stopped run left, taken up once
_AGENT_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def is_run_id(text: str) -> bool:
    """Whether ``text`` could be a run id (hex digits only: safe as a file name)."""
    return isinstance(text, str) and bool(_RUN_ID_RE.match(text))


def is_agent_id(text: str) -> bool:
    """Whether ``text`` could be an agent id (safe as a part of a file or key name)."""
    return isinstance(text, str) and bool(_AGENT_ID_RE.match(text))


def take_up(folder: Path, run_id: str, agent_id: str, mine: str) -> bool:
    """Whether the run ``mine`` takes up the agent the stopped run ``run_id`` left: it is
    the first to, or took it up already, or the run that did has ended too. Decided under
    an exclusive lock, so once across the processes sharing ``folder``. A folder that takes
    no writes (full, read-only) cannot keep the claim: the caller takes it up, as a lone
    process does."""
    if not is_run_id(run_id) or not is_agent_id(agent_id):
        return False
    marker = folder / f"{run_id}.{agent_id}{_TAKEN}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / ".taking", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        logger.warning("no claim kept on agent %s of run %s: %s", agent_id, run_id, exc)
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            taker = marker.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            taker = ""
        if taker and taker != mine and run_alive(folder, taker):
            return False
        marker.write_text(mine, encoding="utf-8")  # under the lock: no reader sees it torn
        return True
    except OSError as exc:
        logger.warning("no claim kept on agent %s of run %s: %s", agent_id, run_id, exc)
        return True
    finally:
        os.close(fd)  # the lock goes with it


def lock_file(folder: Path, run_id: str) -> Path:
    if not is_run_id(run_id):
        raise ValueError(f"not a run id: {run_id!r}")
    return folder / f"{run_id}{_SUFFIX}"


class HeldRun:
    """This process's run: its lock, held until ``release()`` or the process's end."""

    def __init__(self, run_id: str, file: Path, fd: int) -> None:
        self.run_id = run_id
        self.file = file
        self._fd: int | None = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """End the run: the lock is let go; the file stays, so the next start finds the run
        ended and cleans up after it (see ``forget_run``). Safe to call twice."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the only descriptor releases the flock


def begin_run(folder: Path, clock: Clock) -> HeldRun:
    """A new run of this process, its lock held."""
    folder.mkdir(parents=True, exist_ok=True)
    while True:
        run_id = clock.token(RUN_ID_BYTES)
        file = lock_file(folder, run_id)
        try:
            # O_CLOEXEC: no child (the claude CLI, a tool command) may keep the lock alive.
            fd = os.open(file, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        except FileExistsError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            # Someone cleaning up ended runs may have seen the new file before it was locked
            # and removed it: a lock on a removed file protects nothing, so take another id.
            if _same_file(fd, file):
                # For people looking: a full disk leaves the lock, which is what counts.
                with contextlib.suppress(OSError):
                    os.write(fd, f"pid {os.getpid()}\n".encode())
                logger.debug("began run %s (%s)", run_id, file)
                return HeldRun(run_id, file, fd)
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


def run_alive(folder: Path, run_id: str) -> bool:
    """Whether a process holds the run's lock. False for a malformed id, a missing lock file
    and a free lock."""
    if not is_run_id(run_id):
        return False
    try:
        fd = os.open(lock_file(folder, run_id), os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return False
    try:
        return not _try_shared(fd)
    finally:
        os.close(fd)


def ended_runs(folder: Path) -> list[str]:
    """The runs whose lock file is in ``folder`` but whose lock nobody holds."""
    try:
        names = sorted(entry.name for entry in os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    ids = [name.removesuffix(_SUFFIX) for name in names if name.endswith(_SUFFIX)]
    return [run_id for run_id in ids if is_run_id(run_id) and _is_free(folder, run_id)]


def forget_run(folder: Path, run_id: str) -> bool:
    """Remove an ended run's lock file; True when it was removed. A run that holds its lock
    (or began again under that id) is left alone."""
    if not is_run_id(run_id):
        return False
    file = lock_file(folder, run_id)
    try:
        fd = os.open(file, os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return False
    try:
        # Removed while holding the shared lock: a process beginning a run on this very file
        # waits for it, then sees the file gone (``begin_run`` checks) and takes another id.
        if not _try_shared(fd) or not _same_file(fd, file):
            return False
        file.unlink(missing_ok=True)
        for taken in folder.glob(f"{run_id}.*{_TAKEN}"):
            taken.unlink(missing_ok=True)
        return True
    finally:
        os.close(fd)


def _is_free(folder: Path, run_id: str) -> bool:
    try:
        fd = os.open(lock_file(folder, run_id), os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return False  # forgotten meanwhile: nothing left to clean up
    try:
        return _try_shared(fd)
    finally:
        os.close(fd)


def _try_shared(fd: int) -> bool:
    """Take a shared lock without waiting; False when an exclusive holder (a live run) has it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _same_file(fd: int, file: Path) -> bool:
    """Whether ``fd`` is still the file at ``file`` (not removed or replaced)."""
    try:
        named = os.stat(file)
    except FileNotFoundError:
        return False
    opened = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)


class FileRuns:
    """The RunLiveness protocol over a folder of run locks (the file store's ``.runs/``):
    this process's run is begun on first use and ended by ``end()``."""

    def __init__(self, folder: Path, clock: Clock) -> None:
        self.folder = folder
        self._clock = clock
        self._run: HeldRun | None = None
        self._guard = threading.Lock()

    async def begin_run(self) -> str:
        run = self._run
        if run is not None:
            return run.run_id
        return await asyncio.to_thread(self._begin)

    async def run_alive(self, run_id: str) -> bool:
        run = self._run
        if run is not None and run.run_id == run_id:
            return True
        return await asyncio.to_thread(run_alive, self.folder, run_id)

    async def ended_runs(self) -> list[str]:
        return await asyncio.to_thread(ended_runs, self.folder)

    async def forget_run(self, run_id: str) -> None:
        await asyncio.to_thread(forget_run, self.folder, run_id)

    async def take_up(self, run_id: str, agent_id: str) -> bool:
        mine = await self.begin_run()
        return await asyncio.to_thread(take_up, self.folder, run_id, agent_id, mine)

    def end(self) -> None:
        """This process's run ends (its lock let go); the next ``begin_run`` begins another."""
        with self._guard:
            run, self._run = self._run, None
        if run is not None:
            run.release()

    def _begin(self) -> str:
        with self._guard:  # two first dispatches at once begin one run
            if self._run is None:
                self._run = begin_run(self.folder, self._clock)
            return self._run.run_id
