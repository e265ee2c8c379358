"""What an incoming Slack event or command means. Pure functions over untrusted input.

An event becomes a ``UserMessage`` (or ``Ignore`` with a reason); with what the bot knows
about its thread, ``decide`` turns it into ``NewTask``, ``FollowUp``,
``MentionInUnboundThread`` or ``Ignore``. ``/harness`` text becomes a ``Command``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from bot.assistant import GREETING
from bot.blocks import escape
from harness.agents.directives import Directives, parse_directives
from harness.agents.visibility import is_direct_message
from harness.tasks.model import ThreadRef

# Message subtypes that are still a person talking to the bot.
_USER_SUBTYPES = frozenset({"thread_broadcast", "file_share"})
_ENTITIES = (("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&"))
# Slack's own limit on a message's text: a request is never cut short of it.
MAX_TEXT_CHARS = 40_000
# Characters that show nothing: format characters (zero-width space, joiners, marks,
# the BOM), fillers that render blank, and whitespace.
_INVISIBLE = frozenset("\u00ad\u034f\u115f\u1160\u17b4\u17b5\u180e\u3164\uffa0")
USER_ID_RE = re.compile(r"^[UW][A-Z0-9]{1,20}$")
AGENT_ID_RE = re.compile(r"^a[0-9a-f]{1,16}$")


# Why an event starts nothing, as the bot acts on it; ``Ignore.reason`` says it for the log.
IgnoreKind = Literal[
    "not for the bot",
    "empty",
    "invisible",
    "directives only",
    "already handled",
    "duplicate",
    "not allowed",
]


@dataclass(frozen=True)
class Ignore:
    kind: IgnoreKind
    reason: str


@dataclass(frozen=True)
class UserMessage:
    """A person's message, with the bot's mention taken out of ``text``."""

    channel: str
    ts: str
    thread_ts: str | None
    user: str
    text: str
    mentioned: bool
    is_dm: bool
    # Characters past MAX_TEXT_CHARS that were left out (0: the whole message).
    cut: int = 0
    # It had characters, none of them visible (zero-width spaces and the like): no text.
    invisible: bool = False
    # `plan first:` and `model:<name>` it started with (taken off ``text``).
    directives: Directives = field(default_factory=Directives)

    @property
    def top_level(self) -> bool:
        return self.thread_ts is None or self.thread_ts == self.ts

    @property
    def thread(self) -> ThreadRef:
        """The thread the message belongs to (its own, when it is top level)."""
        return ThreadRef(self.channel, self.thread_ts or self.ts)


@dataclass(frozen=True)
class NewTask:
    message: UserMessage


@dataclass(frozen=True)
class FollowUp:
    message: UserMessage


@dataclass(frozen=True)
class MentionInUnboundThread:
    message: UserMessage


Decision = Ignore | NewTask | FollowUp | MentionInUnboundThread


def _str(event: Mapping[str, Any], key: str) -> str:
    value = event.get(key)
    return value if isinstance(value, str) else ""


def unescape(text: str) -> str:
    """Slack sends ``&``, ``<`` and ``>`` typed by a person as entities."""
    for entity, char in _ENTITIES:
        text = text.replace(entity, char)
    return text


def mentions(text: str, bot_user_id: str) -> bool:
    return (
        bool(bot_user_id) and re.search(rf"<@{re.escape(bot_user_id)}(\|[^>]*)?>", text) is not None
    )


def strip_mention(text: str, bot_user_id: str) -> str:
    """``"<@UBOT> plan: x"`` -> ``"plan: x"`` (every mention of the bot, and the punctuation
    people put after a leading one)."""
    if bot_user_id:
        text = re.sub(rf"<@{re.escape(bot_user_id)}(\|[^>]*)?>", " ", text)
    text = re.sub(r"^[\s,:;]+", "", text)
    return re.sub(r"[ \t]{2,}", " ", text).strip()


def parse_message_event(event: Mapping[str, Any], bot_user_id: str) -> UserMessage | Ignore:
    """A ``message`` or ``app_mention`` event as a person's message, or why it is ignored."""
    subtype = event.get("subtype")
    if event.get("bot_id") or subtype == "bot_message" or event.get("bot_profile"):
        return Ignore("not for the bot", "bot message")
    if subtype == "message_changed":
        return Ignore("not for the bot", "edit")
    if subtype == "message_deleted":
        return Ignore("not for the bot", "deletion")
    if subtype is not None and subtype not in _USER_SUBTYPES:
        return Ignore("not for the bot", f"message subtype {subtype!r}")
    if event.get("hidden"):
        return Ignore("not for the bot", "hidden message")
    user, channel, ts = _str(event, "user"), _str(event, "channel"), _str(event, "ts")
    if not (user and channel and ts):
        return Ignore("not for the bot", "no user, channel or ts")
    if bot_user_id and user == bot_user_id:
        return Ignore("not for the bot", "bot message")
    whole = _str(event, "text")
    raw = whole[:MAX_TEXT_CHARS]
    is_dm = event.get("channel_type") == "im" or (
        "channel_type" not in event and is_direct_message(channel)
    )
    directives, text = parse_directives(unescape(strip_mention(raw, bot_user_id)))
    invisible = bool(text) and not visible(text)
    if invisible:
        text = ""
    cut = len(whole) - len(raw)
    if cut:  # the agent is told too: what it has is not the whole request
        text += f"\n\n[The request was cut here: {cut} more characters were not received.]"
    return UserMessage(
        channel=channel,
        ts=ts,
        thread_ts=_str(event, "thread_ts") or None,
        user=user,
        text=text,
        mentioned=mentions(raw, bot_user_id),
        is_dm=is_dm,
        cut=cut,
        invisible=invisible,
        directives=directives,
    )


def visible(text: str) -> bool:
    """Whether ``text`` shows anything: a character that is not whitespace, a format
    character (zero-width space, joiners, direction marks) or a blank filler."""
    return any(
        not ch.isspace() and ch not in _INVISIBLE and unicodedata.category(ch) not in ("Cf", "Cc")
        for ch in text
    )


def decide(message: UserMessage, *, bound: bool) -> Decision:
    """What to do, given whether the message's thread is already bound to a task.

    In a DM every message is addressed to the bot, so it counts as a mention."""
    addressed = message.mentioned or message.is_dm
    if message.top_level:
        if bound:  # a top-level message is its own thread: bound means handled already
            return Ignore("already handled", "message already handled")
        if not addressed:
            return Ignore("not for the bot", "top-level channel message without a mention")
        if not message.text:
            return _empty(message)
        return NewTask(message)
    if bound:
        return FollowUp(message) if message.text else _empty(message)
    if addressed:
        return MentionInUnboundThread(message)
    return Ignore("not for the bot", "unbound thread without a mention")


def _empty(message: UserMessage) -> Ignore:
    if message.invisible:
        return Ignore("invisible", "a message of invisible characters only")
    if message.directives != Directives():  # `model:opus` alone: its person hears what is missing
        return Ignore("directives only", "directives and no request")
    return Ignore("empty", "empty message")


def classify(event: Mapping[str, Any], bot_user_id: str, *, bound: bool) -> Decision:
    parsed = parse_message_event(event, bot_user_id)
    return parsed if isinstance(parsed, Ignore) else decide(parsed, bound=bound)


def clicked_thread(body: Mapping[str, Any]) -> ThreadRef:
    """The thread a button was clicked in: its message's thread (or the message itself)."""
    container = body.get("container") or {}
    message = body.get("message") or {}
    channel = str((body.get("channel") or {}).get("id") or container.get("channel_id") or "")
    ts = container.get("thread_ts") or message.get("thread_ts") or container.get("message_ts")
    return ThreadRef(channel, str(ts or ""))


# ------------------------------------------------------------------ thread context


@dataclass(frozen=True)
class EarlierMessage:
    who: str
    text: str


def earlier_messages(
    replies: Sequence[Mapping[str, Any]], before_ts: str, bot_user_id: str
) -> list[EarlierMessage]:
    """The thread's messages before ``before_ts`` (from conversations.replies), as context."""

    def key(ts: str) -> tuple[int, int]:
        whole, _, frac = ts.partition(".")
        return (int(whole) if whole.isdigit() else 0, int((frac + "000000")[:6] or 0))

    found = []
    for m in replies:
        ts, text = _str(m, "ts"), _str(m, "text")
        if not ts or key(ts) >= key(before_ts) or not text.strip():
            continue
        if m.get("subtype") == "assistant_app_thread" or text == GREETING:
            continue  # an assistant thread's root and the bot's greeting say nothing of the task
        is_bot = bool(m.get("bot_id")) or _str(m, "user") == bot_user_id
        who = "the bot" if is_bot else (_str(m, "user") or "someone")
        found.append(EarlierMessage(who, unescape(strip_mention(text, bot_user_id))))
    return found


def thread_task_description(
    request: str, earlier: Sequence[EarlierMessage], *, budget_chars: int = 8000
) -> str:
    """The request first (it names the task), then the thread's earlier messages, newest kept
    when they do not all fit (the text says how many were left out)."""
    head = request or "Work on what the earlier messages in this Slack thread ask for."
    if not earlier:
        return head
    lines: list[str] = []
    used = 0
    for message in reversed(earlier):
        line = f"- {message.who}: {' '.join(message.text.split())}"
        if used + len(line) > budget_chars and lines:
            break
        lines.append(line)
        used += len(line) + 1
    lines.reverse()
    left_out = len(earlier) - len(lines)
    note = f"\n({left_out} earlier message(s) left out)" if left_out else ""
    return f"{head}\n\nEarlier messages in this Slack thread:{note}\n" + "\n".join(lines)


# ------------------------------------------------------------------ /harness


CommandName = Literal["list", "kill", "tasks", "help", "connect", "disconnect", "review", "memory"]
# The forges a person can link an account of (`/harness connect github`).
FORGES = ("github",)


@dataclass(frozen=True)
class Command:
    name: CommandName
    agent_id: str | None = None
    forge: str | None = None  # connect and disconnect: which forge
    url: str | None = None  # review: the pull request's address


@dataclass(frozen=True)
class BadCommand:
    message: str


def parse_command(text: str) -> Command | BadCommand:
    words = text.strip().split()
    if not words or words[0].lower() == "help":
        return Command("help")
    name, args = words[0].lower(), words[1:]
    if name in ("list", "tasks", "memory"):
        return Command("list" if name == "list" else "tasks" if name == "tasks" else "memory")
    if name == "kill":
        if len(args) != 1:
            return BadCommand("Usage: `/harness kill <agentId>` (the ids are in `/harness list`).")
        agent_id = args[0].strip("`").lower()
        if not AGENT_ID_RE.match(agent_id):
            shown = escape(args[0][:40])
            return BadCommand(
                f"`{shown}` is not an agent id; ids look like `a1b2c3` (see `/harness list`)."
            )
        return Command("kill", agent_id)
    if name in ("connect", "disconnect"):
        forge = args[0].strip("`").lower() if len(args) == 1 else ""
        if forge not in FORGES:
            does = (
                "links your GitHub account: your pull requests are then opened as you"
                if name == "connect"
                else "unlinks it: the bot opens your pull requests again"
            )
            return BadCommand(f"Usage: `/harness {name} github` ({does}).")
        return Command("connect" if name == "connect" else "disconnect", forge=forge)
    if name == "review":
        url = review_request(text)
        if url is None:
            return BadCommand(
                "Usage: `/harness review <pull request URL>` (its findings are posted on the "
                "pull request as one review, its link in a thread here)."
            )
        return Command("review", url=url)
    return BadCommand(f"Unknown command `{escape(words[0][:40])}`.")


# `review <url>`: Slack sends a link as `<url>` or `<url|label>`; a word after it is no
# longer a request for a review but a task about one (routed as any other).
_REVIEW = re.compile(r"^\s*review\s+<?(?P<url>https?://[^\s<>|]+)(?:\|[^>]*)?>?\s*$", re.I)


def review_request(text: str) -> str | None:
    """The pull request's address when ``text`` is ``review <url>``, else None."""
    match = _REVIEW.match(text)
    return match["url"] if match is not None else None


# `remember <note>`: a note for the thread's channel; `remember repo:<name> <note>`: for that
# repository. Only at the very start of a message to the bot.
_REMEMBER = re.compile(r"^\s*remember\b[:,]?\s*(?P<rest>.*)$", re.I | re.S)
_REPOSITORY_WORD = re.compile(r"^repo(?:sitory)?:(?P<name>\S+)\s*(?P<text>.*)$", re.S)


@dataclass(frozen=True)
class Remember:
    text: str  # "" when nothing followed the word
    repository: str | None = None  # named with repo:<name>; None: the thread's channel


def remember_request(text: str) -> Remember | None:
    """The note when ``text`` is ``remember [repo:<name>] <note>``, else None."""
    match = _REMEMBER.match(text)
    if match is None:
        return None
    rest = match["rest"].strip()
    named = _REPOSITORY_WORD.match(rest)
    if named is not None:
        return Remember(named["text"].strip(), named["name"])
    return Remember(rest)
