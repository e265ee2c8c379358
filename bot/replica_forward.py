"""Bot replicas: a Slack request about a thread whose agent another live replica holds is
handed to that replica, verbatim (still signed), and acked here. That replica holds the
agent's questions and approvals, its Stop, its buttons and the follow-ups queued behind it,
so a reply, a click or a Stop in the thread works whichever replica Slack or the load
balancer picked. A request about a thread no other live replica holds (a new request, a
thread whose agents ended, a replica that died) is handled here. When the holder does not
take a letter within the bound (it is stopping, or cut off from NATS), a message is handled
here (nothing said is lost), while a Stop or a click, which only the holder can act on, is
not: the thread says it was not passed on and to press again in a few seconds, by when a
stopped holder's agents are taken over by a live replica.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Protocol, TypedDict
from urllib.parse import parse_qsl

from harness.agents.orchestrator import Orchestrator
from harness.errors import HarnessError
from harness.tasks.model import ThreadRef
from harness.tasks.nats_buckets import nats_failures
from harness.tasks.replica_mail import ReplicaMail

logger = logging.getLogger(__name__)

# The kinds of request that belong to a thread: a message event in it, a button under a
# message of it. Slash commands and the Home tab are answered where they arrive.
FORWARDED_KINDS = ("event_callback", "block_actions")
# Events that say something in a thread: handled here when the holder does not take them.
SAID = ("message", "app_mention")
STOPPED = "agent_session_stopped"  # the session's Stop (bot/sessions.py's STOP_EVENT)
NOT_PASSED_ON = (
    "⚠️ Your {what} was not passed on: the bot process running this thread's agent did not "
    "answer in time. Press it again in a few seconds (should that process have stopped, "
    "another takes its agent over by then)."
)

Tell = Callable[[ThreadRef, str], Coroutine[Any, Any, object]]


class Holders(Protocol):
    """Who holds a thread's agent (the task desk, from the store)."""

    async def this_run(self) -> str: ...

    async def held_elsewhere(self, thread: ThreadRef) -> str | None: ...


class Letter(TypedDict):
    """A Slack request as another replica receives it."""

    kind: str
    body: str
    query: str
    headers: dict[str, str]


def payload_of(kind: str, body: str) -> Mapping[str, Any]:
    """The JSON payload of a request that checked out (an interaction's is in a form field)."""
    if kind == "block_actions":
        return json.loads(dict(parse_qsl(body, keep_blank_values=True))["payload"])  # type: ignore[no-any-return]
    return json.loads(body)  # type: ignore[no-any-return]


def thread_of(kind: str, payload: Mapping[str, Any]) -> ThreadRef | None:
    """The thread a request is about, when it is about one."""
    channel: object = None
    thread_ts: object = None
    if kind == "event_callback":
        event = payload.get("event") or {}
        channel, thread_ts = event.get("channel"), event.get("thread_ts")
    elif kind == "block_actions":
        container = payload.get("container") or {}
        message = payload.get("message") or {}
        channel = (payload.get("channel") or {}).get("id") or container.get("channel_id")
        thread_ts = message.get("thread_ts") or container.get("thread_ts")
    if isinstance(channel, str) and isinstance(thread_ts, str) and channel and thread_ts:
        return ThreadRef(channel, thread_ts)
    return None


def letter_of(kind: str, body: str, query: str, headers: Mapping[str, str]) -> bytes:
    letter: Letter = {"kind": kind, "body": body, "query": query, "headers": dict(headers)}
    return json.dumps(letter).encode("utf-8")


def read_letter(data: bytes) -> Letter:
    letter = json.loads(data)
    return {
        "kind": str(letter["kind"]),
        "body": str(letter["body"]),
        "query": str(letter["query"]),
        "headers": {str(k): str(v) for k, v in dict(letter["headers"]).items()},
    }


def what_was_sent(kind: str, payload: Mapping[str, Any]) -> str | None:
    """What a request that the holder did not take is, in the words the thread is told;
    None for a message, which is handled where it arrived instead."""
    if kind == "block_actions":
        return "click"
    event_type = (payload.get("event") or {}).get("type")
    return None if event_type in SAID else "Stop" if event_type == STOPPED else "request"


class ThreadForwarder:
    """``tell`` posts in a thread (a Stop or click that was not passed on is said there)."""

    def __init__(self, desk: Holders, mail: ReplicaMail, tell: Tell) -> None:
        self._desk = desk
        self._mail = mail
        self._tell = tell

    @classmethod
    def for_replicas(
        cls, orchestrator: Orchestrator, shared: bool, tell: Tell
    ) -> ThreadForwarder | None:
        """With replicas (``shared``: the ledger is the store's, on NATS), the forwarder on
        the store's server; one process needs none."""
        if not shared:
            return None
        return cls(orchestrator.tasks, ReplicaMail(orchestrator.config.store), tell)

    async def serve(self, take: Callable[[bytes], Coroutine[Any, Any, None]]) -> None:
        """Takes what other replicas hand this one (``take``: the intake's). Out of reach at
        start: the others handle its threads' requests themselves, as with a dead replica."""
        unreachable: tuple[type[BaseException], ...] = (HarnessError, *nats_failures())
        try:
            await self._mail.serve(await self._desk.this_run(), take)
        except unreachable as exc:
            logger.warning("this replica takes no requests from the others: %s", exc)

    async def close(self) -> None:
        await self._mail.close()

    async def forward(self, kind: str, body: str, query: str, headers: Mapping[str, str]) -> bool:
        """Whether the request went to the replica that holds its thread's agent (False:
        it is this replica's to handle)."""
        if kind not in FORWARDED_KINDS:
            return False
        unreachable: tuple[type[BaseException], ...] = (HarnessError, *nats_failures())
        try:
            payload = payload_of(kind, body)
            thread = thread_of(kind, payload)
            holder = await self._desk.held_elsewhere(thread) if thread is not None else None
        except unreachable as exc:  # the store out of reach: decided here
            logger.warning("could not tell which replica holds a thread: %s", exc)
            return False
        if thread is None or holder is None:
            return False
        if await self._mail.send(holder, letter_of(kind, body, query, headers)):
            logger.info("a %s in thread %s went to replica %s, which holds its agent",
                        kind, thread, holder)  # fmt: skip
            return True
        what = what_was_sent(kind, payload)
        if what is None:
            logger.warning("replica %s holds thread %s but did not take a message: "
                           "handled here", holder, thread)  # fmt: skip
            return False
        logger.warning("replica %s holds thread %s but did not take a %s: the thread is told",
                       holder, thread, what)  # fmt: skip
        await self._tell(thread, NOT_PASSED_ON.format(what=what))
        return True
