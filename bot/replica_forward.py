"""Bot replicas: a Slack request about a thread whose agent another live replica holds is
handed to that replica, verbatim (still signed), and acked here. That replica holds the
agent's questions and approvals, its Stop, its buttons and the follow-ups queued behind it,
so a reply, a click or a Stop in the thread works whichever replica Slack or the load
balancer picked; so does ``/harness kill`` of the agent (its answer goes back by the
command's response_url). A request about a thread no other live replica holds (a new request, a
thread whose agents ended, a replica that died) is handled here. When the holder does not
take a letter within the bound (it is stopping, or cut off from NATS), a message is handled
here (nothing said is lost), while a Stop or a click, which only the holder can act on, is
not: the thread says it was not passed on and to press again in a few seconds, by when a
stopped holder's agents are taken over by a live replica.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Protocol, TypedDict
from urllib.parse import parse_qsl

import aiohttp
from slack_bolt.response import BoltResponse
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.parsing import Command, parse_command
from harness.agents.orchestrator import Orchestrator
from harness.errors import HarnessError
from harness.tasks.model import ThreadRef
from harness.tasks.nats_buckets import nats_failures
from harness.tasks.replica_mail import ReplicaMail

logger = logging.getLogger(__name__)

# The kinds of request that belong to a thread's agent: a message event in its thread, a
# button under a message of it, ``/harness kill`` of it. Other slash commands and the Home
# tab are answered where they arrive.
FORWARDED_KINDS = ("event_callback", "block_actions", "command")
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

    async def agent_held_elsewhere(self, agent_id: str) -> str | None: ...


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
    if kind == "command":
        return dict(parse_qsl(body, keep_blank_values=True))
    return json.loads(body)  # type: ignore[no-any-return]


def killed_agent(kind: str, payload: Mapping[str, Any]) -> str | None:
    """The agent a ``/harness kill <agentId>`` is about, when the request is one."""
    if kind != "command":
        return None
    parsed = parse_command(str(payload.get("text") or ""))
    return parsed.agent_id if isinstance(parsed, Command) and parsed.name == "kill" else None


async def answer_handed_command(body: str, response: BoltResponse) -> None:
    """A slash command another replica handed here was acked there, empty: its answer (what
    Bolt acked here) goes to the person through the command's response_url."""
    response_url = dict(parse_qsl(body, keep_blank_values=True)).get("response_url")
    if not response_url or not response.body or response.status != 200:
        return
    try:
        answer = json.loads(response.body)
    except ValueError:
        answer = {"text": response.body}
    if not isinstance(answer, dict):
        return
    try:
        await AsyncWebhookClient(response_url).send_dict({"response_type": "ephemeral", **answer})
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        logger.warning("the answer to a command handed here was not delivered: %s", exc)


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
        self._telling: set[asyncio.Task[object]] = set()

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
        await asyncio.gather(*self._telling, return_exceptions=True)

    async def forward(self, kind: str, body: str, query: str, headers: Mapping[str, str]) -> bool:
        """Whether the request went to the replica that holds its thread's agent (False:
        it is this replica's to handle)."""
        if kind not in FORWARDED_KINDS:
            return False
        unreachable: tuple[type[BaseException], ...] = (HarnessError, *nats_failures())
        try:
            payload = payload_of(kind, body)
            thread = thread_of(kind, payload)
            agent = killed_agent(kind, payload)
            if thread is not None:
                holder = await self._desk.held_elsewhere(thread)
            elif agent is not None:
                holder = await self._desk.agent_held_elsewhere(agent)
            else:
                holder = None
        except unreachable as exc:  # the store out of reach: decided here
            logger.warning("could not tell which replica holds a thread: %s", exc)
            return False
        if holder is None:
            return False
        about = thread if thread is not None else f"agent {agent}"
        if await self._mail.send(holder, letter_of(kind, body, query, headers)):
            logger.info("a %s about %s went to replica %s, which holds its agent",
                        kind, about, holder)  # fmt: skip
            return True
        if thread is None:  # a kill: answered here, from what this replica knows
            logger.warning("replica %s holds %s but did not take a command", holder, about)
            return False
        what = what_was_sent(kind, payload)
        if what is None:
            logger.warning("replica %s holds thread %s but did not take a message: "
                           "handled here", holder, thread)  # fmt: skip
            return False
        logger.warning("replica %s holds thread %s but did not take a %s: the thread is told",
                       holder, thread, what)  # fmt: skip
        # Said apart: the click or event is acked at once, within Slack's 3 s.
        told = asyncio.get_running_loop().create_task(
            self._tell(thread, NOT_PASSED_ON.format(what=what)), name="not passed on"
        )
        self._telling.add(told)
        told.add_done_callback(self._telling.discard)
        return True
