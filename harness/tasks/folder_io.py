"""A task store's file work from async code: its logs and text files read and written with
``aiofiles``, every step on one thread of the store's own.

The rules: each step (taking a task's folder, opening, writing, reading, replacing a file,
letting the folder go) runs on that one thread in the order it was asked, so a task's
lock taken there (the store's ``FolderOpener``, a plain context manager) is held by that
thread across the file work and let go there after it, even when the caller was cancelled
meanwhile (a step already asked is never dropped); a whole file is written to a temporary
file beside it and moved over it (readers see the old or the new file, never a torn one).
The event loop only waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import weakref
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack, asynccontextmanager
from pathlib import Path
from typing import TypeVar

import aiofiles
import aiofiles.os

T = TypeVar("T")

# Opens a task's folder for its files (the file store holds the task's lock meanwhile);
# raises TaskNotFoundError when the task does not exist. Blocking: run on the files' thread.
FolderOpener = Callable[[str], AbstractContextManager[Path]]
# Logs and text files: readable by teammates in the same folder.
_MODE = 0o644


def _opener(path: str, flags: int) -> int:
    return os.open(path, flags, _MODE)


def _exact_opener(path: str, flags: int) -> int:
    """A new file with exactly ``_MODE``, whatever the umask, as ``harness.atomic`` makes
    them."""
    fd = os.open(path, flags, _MODE)
    os.fchmod(fd, _MODE)
    return fd


class FolderIO:
    """The file work of one store, on its own thread (made on first use, ended by close)."""

    def __init__(self, open_folder: FolderOpener) -> None:
        self._open_folder = open_folder
        self._executor: ThreadPoolExecutor | None = None
        self._turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    def _thread(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="task-files")
        return self._executor

    def _ask(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        return asyncio.get_running_loop().run_in_executor(self._thread(), fn)

    @asynccontextmanager
    async def folder(self, slug: str) -> AsyncIterator[Path]:
        """The task's folder, taken (locked) on the files' thread until the block ends. A
        cancel that comes while it is being taken goes on once the block has run."""
        # One folder held at a time: the thread would otherwise wait on a task's lock that
        # it holds itself, with the steps that let it go queued behind.
        async with self._turn(), self._held(slug) as path:
            yield path

    def _turn(self) -> asyncio.Lock:
        # Per loop (an asyncio lock is bound to one); a store's file work runs on one loop.
        loop = asyncio.get_running_loop()
        turn = self._turns.get(loop)
        if turn is None:
            turn = self._turns[loop] = asyncio.Lock()
        return turn

    @asynccontextmanager
    async def _held(self, slug: str) -> AsyncIterator[Path]:
        held = ExitStack()
        # Shielded: a step asked of the thread runs whatever happens to its caller, so a
        # lock it takes is always let go (``held.close`` is asked after it, on that thread).
        entered = self._ask(lambda: held.enter_context(self._open_folder(slug)))
        cancelled = False
        try:
            try:
                path = await asyncio.shield(entered)
            except asyncio.CancelledError:
                cancelled = True
                path = await asyncio.shield(entered)
            yield path
        finally:
            await asyncio.shield(self._ask(held.close))
        if cancelled:
            raise asyncio.CancelledError

    async def append(self, path: Path, data: bytes) -> None:
        """``data`` at the end of ``path`` (made if missing, in a folder made if missing), in
        one O_APPEND write where the disk allows: other appenders never split a line of it."""
        thread = self._thread()
        with contextlib.suppress(FileExistsError):
            await aiofiles.os.mkdir(path.parent, executor=thread)
        # Unbuffered: each write is one write(2), never a piece of a line.
        async with aiofiles.open(path, "ab", buffering=0, opener=_opener, executor=thread) as file:
            view = memoryview(data)
            while view:
                view = view[await file.write(view) :]

    async def read_text(self, path: Path, *, errors: str = "strict") -> str | None:
        """The whole of a UTF-8 file; None when there is no such file."""
        try:
            async with aiofiles.open(
                path, encoding="utf-8", errors=errors, executor=self._thread()
            ) as file:
                return await file.read()
        except FileNotFoundError:
            return None

    async def write_text(self, path: Path, text: str) -> None:
        """Replace ``path`` with ``text`` (UTF-8) atomically: a synced temporary file beside
        it, moved over it; its folder made on first use."""
        thread = self._thread()
        await aiofiles.os.makedirs(path.parent, exist_ok=True, executor=thread)
        temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        done = False
        try:
            async with aiofiles.open(
                temporary, "xb", buffering=0, opener=_exact_opener, executor=thread
            ) as file:
                view = memoryview(text.encode("utf-8"))
                while view:
                    view = view[await file.write(view) :]
                fd = file.fileno()
                await self._ask(lambda: os.fsync(fd))
            await aiofiles.os.replace(temporary, path, executor=thread)
            done = True
        finally:
            if not done:
                with contextlib.suppress(FileNotFoundError):
                    await aiofiles.os.unlink(temporary, executor=thread)

    def close(self) -> None:
        """Ends the thread once the steps asked are done (a later step makes a new one). It
        is let go rather than shut down: a step still under way (a file opened, not yet
        read) asks it again, and a shut-down one would refuse; its thread ends when the last
        such step lets go of it."""
        self._executor = None
