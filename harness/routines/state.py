"""What each routine did, kept with the tasks (``<tasks>/.routines/``): its state (last slot,
paused, failures in a row, recent runs, skipped firings) in ``<name>.json``, written atomically
under a lock the bot and `harness routines` share; and the run requests `harness routines run`
leaves for a running bot in ``requests/``, each answered beside it.

A request is a file the bot's scheduler looks for at each tick (one ``scandir`` of a folder that
is nearly always empty), so `run` needs no port nor socket, and works whichever process of
the bot is up."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypedDict

from harness import serialise
from harness.atomic import write_atomic
from harness.errors import HarnessError
from harness.routines.model import KEEP, Pause, RoutineState, RunRecord, Skip

FOLDER = ".routines"


class RunRequest(TypedDict):
    id: str
    routine: str
    by: str


class RunAnswer(TypedDict, total=False):
    slug: str
    thread: str
    error: str


class FiringHold:
    """A lock a process holds on one firing while it starts its task: the kernel lets it go
    when the process dies, so a later start tells a firing being started now from one left
    half-started."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path, self.fd = path, fd

    def release(self) -> None:
        # Removed while still held: a process opening the path afterwards locks a fresh
        # file, and finds the firing no longer starting in the state.
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        os.close(self.fd)


class RoutineStates:
    def __init__(self, tasks_dir: Path) -> None:
        self.folder = tasks_dir / FOLDER
        self.requests = self.folder / "requests"

    def _file(self, name: str) -> Path:
        return self.folder / f"{name}.json"

    @contextlib.contextmanager
    def _locked(self, name: str) -> Iterator[None]:
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.folder / f".{name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def read(self, name: str) -> RoutineState:
        """The routine's state; a fresh one when it never ran."""
        file = self._file(name)
        try:
            data = file.read_bytes()
        except FileNotFoundError:
            return RoutineState(name)
        except OSError as exc:
            raise HarnessError(
                f"{file}: cannot read the routine's state ({exc})",
                fix="check the folder's permissions",
            ) from exc
        try:
            return serialise.load_json(RoutineState, data, given={"name": name})
        except serialise.DecodeError as exc:
            raise HarnessError(
                f"{file}: the routine's state does not read ({exc.problems[0].problem})",
                fix="delete the file: the routine starts afresh (its tasks are kept)",
            ) from exc.error

    def update(self, name: str, change: Callable[[RoutineState], RoutineState]) -> RoutineState:
        """``change`` applied to the state, under the lock, and written atomically."""
        with self._locked(name):
            state = change(self.read(name))
            write_atomic(self._file(name), serialise.dump_json(state) + b"\n")
            return state

    def hold_firing(self, name: str, firing_key: str) -> FiringHold | None:
        """The firing held by this process, or None while another process holds it."""
        folder = self.folder / ".starting"
        folder.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(f"{name}\0{firing_key}".encode()).hexdigest()[:40]
        path = folder / f"{digest}.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return FiringHold(path, fd)

    def serve(self) -> int:
        """Held (shared) by each process whose scheduler runs, until it closes the returned
        descriptor or dies: how `harness routines run` knows at once that no bot is up."""
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.folder / ".serving.lock", os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_SH)
        return fd

    def served(self) -> bool:
        """True while a bot's scheduler on this machine takes run requests."""
        try:
            fd = os.open(self.folder / ".serving.lock", os.O_RDWR)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    # ------------------------------------------------------------------ run requests

    def request_run(self, request: RunRequest) -> None:
        self.requests.mkdir(parents=True, exist_ok=True)
        data = json.dumps(request).encode("utf-8")
        write_atomic(self.requests / f"{request['id']}.request.json", data)

    def take_requests(self) -> list[RunRequest]:
        """The run requests waiting, each taken once (its file removed)."""
        try:
            entries = list(os.scandir(self.requests))
        except FileNotFoundError:
            return []
        taken: list[RunRequest] = []
        for entry in sorted(entries, key=lambda e: e.name):
            if not entry.name.endswith(".request.json"):
                continue
            try:
                data = json.loads(Path(entry.path).read_bytes())
                os.unlink(entry.path)  # taken: another process's scan finds it gone
            except (OSError, ValueError):
                continue
            if isinstance(data, dict) and all(
                isinstance(data.get(k), str) for k in RunRequest.__annotations__
            ):
                taken.append(RunRequest(id=data["id"], routine=data["routine"], by=data["by"]))
        return taken

    def withdraw(self, request_id: str) -> bool:
        """Takes back a request no bot took; False when one did."""
        try:
            os.unlink(self.requests / f"{request_id}.request.json")
        except FileNotFoundError:
            return False
        return True

    def answer(self, request_id: str, answer: RunAnswer) -> None:
        self.requests.mkdir(parents=True, exist_ok=True)
        write_atomic(
            self.requests / f"{request_id}.answer.json", json.dumps(answer).encode("utf-8")
        )

    def take_answer(self, request_id: str) -> RunAnswer | None:
        file = self.requests / f"{request_id}.answer.json"
        try:
            data = json.loads(file.read_bytes())
            file.unlink()
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise HarnessError(f"{file}: unreadable answer ({exc})", fix="run it again") from exc
        answer = RunAnswer()
        for key in ("slug", "thread", "error"):
            if isinstance(data, dict) and isinstance(data.get(key), str):
                answer[key] = data[key]
        return answer


def with_run(state: RoutineState, run: RunRecord) -> RoutineState:
    """The run added, or put in place of the record of the same firing (no longer starting)."""
    runs = [r for r in state.runs if r.firing != run.firing]
    return dataclasses.replace(
        state,
        runs=(*runs, run)[-KEEP:],
        starting=tuple(s for s in state.starting if s.firing.key != run.firing),
    )


def without_starting(state: RoutineState, key: str) -> RoutineState:
    return dataclasses.replace(
        state, starting=tuple(s for s in state.starting if s.firing.key != key)
    )


def with_skip(state: RoutineState, skip: Skip) -> RoutineState:
    return dataclasses.replace(state, skipped=(*state.skipped, skip)[-KEEP:])


def with_ended_run(
    state: RoutineState, record: RunRecord, disable_after_failures: int, now: str
) -> RoutineState:
    """``state`` with its run ``record`` ended: failures in a row counted (a completed run
    resets them, a killed or interrupted one leaves them), and paused at ``now`` once they
    reach ``disable_after_failures``."""
    state = with_run(state, record)
    failures = state.failures
    if record.status == "failed":
        failures += 1
    elif record.status == "completed":
        failures = 0
    state = dataclasses.replace(state, failures=failures)
    if failures >= disable_after_failures and state.paused is None:
        last = f" (`{record.slug}`)" if record.slug else ""
        why = f"{failures} failed runs in a row; the last{last}: {record.error or 'failed'}"
        state = dataclasses.replace(state, paused=Pause(now, "failures", why))
    return state
