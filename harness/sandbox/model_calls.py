"""Which model calls the sandbox's proxy forwards, and what each one costs. Pure.

Measured on the bundled Claude Code CLI 2.1.330 against the scripted model: with
``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`` its only call is ``POST /v1/messages?beta=true``
(``"stream": true``), one per turn; without it also ``HEAD /api/hello``. No token counting and
no side request (title, small/fast model) showed, with Bash, WebFetch, default permission
mode and structured output; ``POST /v1/messages/count_tokens`` is still let through (free, and
the CLI has it). The body's ``model`` is the catalog id of what the CLI was given (``opus``,
``sonnet``, ``haiku``, ``fable`` are its aliases; a retired name is sent as its default;
``[1m]`` is dropped), and ``max_tokens`` is that model's default output limit from the CLI's
own catalog (``CLI_MAX_TOKENS``; 32000 for a name it does not know). The CLI lowers it after a
failure, never raises it, unless ``CLAUDE_CODE_MAX_OUTPUT_TOKENS`` says so.

Prices are the CLI's own (per million tokens), so the cost counted here is at least what it
reports: a name not in the table is priced as its family's dearest, and one of no family as
the dearest of all.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

BODY_LIMIT = 32 * 1024 * 1024  # the largest model request read (a long context is ~4 MB)

MESSAGES = "/v1/messages"
COUNT_TOKENS = "/v1/messages/count_tokens"
# The calls that get the key: (method, path) -> whether the reply is billed.
MODEL_ENDPOINTS: Mapping[tuple[str, str], bool] = {
    ("POST", MESSAGES): True,
    ("POST", COUNT_TOKENS): False,
}
_QUERIES = frozenset({"", "beta=true"})

# What the CLI sends for what it is given (its catalog's aliases and remaps).
CLI_DEFAULT_MODEL = "claude-opus-5-5"
CLI_ALIASES: Mapping[str, str] = {
    "opus": "claude-opus-5-5",
    "sonnet": "claude-sonnet-5-5",
    "haiku": "claude-haiku-5-5",
    "fable": "claude-fable-5-2",
    "claude-opus-4-0": CLI_DEFAULT_MODEL,  # retired: sent as the default
    "claude-opus-4-1": CLI_DEFAULT_MODEL,
}
# The small/fast model the CLI's side work (its Explore subagent, titles) would use.
CLI_SMALL_FAST_MODEL = "claude-haiku-5-5"
CLI_MAX_TOKENS: Mapping[str, int] = {
    "claude-3-5-haiku": 8192,
    "claude-haiku-4-5": 32000,
    "claude-haiku-5-5": 128000,
    "claude-3-5-sonnet": 8192,
    "claude-3-7-sonnet": 32000,
    "claude-sonnet-4-0": 32000,
    "claude-sonnet-4-5": 32000,
    "claude-sonnet-4-6": 32000,
    "claude-sonnet-5": 64000,
    "claude-sonnet-5-5": 128000,
    "claude-opus-4-5": 32000,
    "claude-opus-4-6": 64000,
    "claude-opus-4-7": 64000,
    "claude-opus-4-8": 64000,
    "claude-opus-5": 64000,
    "claude-opus-5-5": 128000,
    "claude-fable-5": 64000,
    "claude-fable-5-1": 64000,
    "claude-fable-5-2": 128000,
    "claude-mythos-5": 64000,
    "claude-mythos-5-1": 64000,
    "claude-mythos-5-2": 128000,
}
CLI_UNKNOWN_MAX_TOKENS = 32000


@dataclass(frozen=True)
class Prices:
    """US dollars per million tokens; ``long_*`` above ``long_above`` prompt tokens."""

    input: float
    output: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float
    long_above: int | None = None
    long: Prices | None = None


def _tier(i: float, o: float, read: float | None = None) -> Prices:
    return Prices(i, o, i * 1.25, i * 2, i / 10 if read is None else read)


_T15 = _tier(15, 75)
_T10 = _tier(10, 50)
_T5 = _tier(5, 25)
_T3 = _tier(3, 15)
PRICES: Mapping[str, Prices] = {
    "claude-3-5-haiku": _tier(0.8, 4),
    "claude-haiku-4-5": _tier(1, 5),
    "claude-haiku-5-5": Prices(0.1, 0.5, 0.125, 0.2, 0.01, 100_000, _tier(0.5, 2.5)),
    "claude-3-5-sonnet": _T3,
    "claude-3-7-sonnet": _T3,
    "claude-sonnet-4-0": _T3,
    "claude-sonnet-4-5": _T3,
    "claude-sonnet-4-6": _T3,
    "claude-sonnet-5": _tier(2, 10),
    "claude-sonnet-5-5": _tier(2, 10),
    "claude-opus-4-0": _T15,
    "claude-opus-4-1": _T15,
    "claude-opus-4-5": _T5,
    "claude-opus-4-6": _T5,
    "claude-opus-4-7": _T5,
    "claude-opus-4-8": _T5,
    "claude-opus-5": _T5,
    "claude-opus-5-5": _tier(4, 20, 0.2),
    "claude-fable-5": _T10,
    "claude-fable-5-1": _tier(10, 50, 0.25),
    "claude-fable-5-2": _tier(8, 40, 0.2),
    "claude-mythos-5": _T10,
    "claude-mythos-5-1": _tier(10, 50, 0.25),
    "claude-mythos-5-2": _tier(8, 40, 0.2),
}
WEB_SEARCH_USD = 0.01
_DATED = re.compile(r"-\d{8}$")


class RefusedCall(Exception):  # noqa: N818 - it is the answer, not a failure of ours
    """A model call not forwarded: answered with ``status`` and ``message`` (an API error
    of ``kind``), and ``x-should-retry: false`` when ``final``."""

    def __init__(self, status: int, kind: str, message: str, *, final: bool = True) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message
        self.final = final


@dataclass(frozen=True)
class ModelPolicy:
    """The models an agent's calls may name, each with the most output tokens it may ask."""

    max_tokens: Mapping[str, int]

    def describe(self) -> str:
        return ", ".join(f"{name} (max_tokens {cap})" for name, cap in self.max_tokens.items())


@dataclass(frozen=True)
class ModelCall:
    """A checked model request: the model it names and whether its reply is billed."""

    model: str
    max_tokens: int | None
    billed: bool


def _plain(model: str) -> str:
    return _DATED.sub("", model.strip().lower().removesuffix("[1m]"))


def canonical(model: str) -> str:
    """The catalog id the CLI sends for ``model``: aliases resolved, ``[1m]`` and a date
    suffix dropped, retired names as the default."""
    name = _plain(model)
    return CLI_ALIASES.get(name, name)


def model_policy(role_model: str | None, env: Mapping[str, str]) -> ModelPolicy:
    """What an agent's CLI sends, from the role's model (None: ``ANTHROPIC_MODEL``, else the
    CLI's default) and the environment it is given: that model and the small/fast one, each
    capped at the CLI's default output limit (``CLAUDE_CODE_MAX_OUTPUT_TOKENS`` over it)."""
    main = role_model or env.get("ANTHROPIC_MODEL") or CLI_DEFAULT_MODEL
    small = env.get("ANTHROPIC_SMALL_FAST_MODEL") or CLI_SMALL_FAST_MODEL
    raised = env.get("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "").strip()
    caps: dict[str, int] = {}
    for given in (main, small):
        sent = canonical(given)
        cap = CLI_MAX_TOKENS.get(sent, CLI_UNKNOWN_MAX_TOKENS)
        if raised.isdigit():
            cap = max(cap, int(raised))
        for name in dict.fromkeys((sent, given.strip().removesuffix("[1m]"))):
            caps[name] = max(cap, caps.get(name, 0))
    return ModelPolicy(caps)


def endpoint(method: str, target: str) -> bool:
    """Whether the reply to ``method target`` (origin form) is billed; RefusedCall (403)
    for every call but the CLI's own."""
    path, _, query = target.partition("?")
    billed = MODEL_ENDPOINTS.get((method, path))
    if billed is None or query not in _QUERIES:
        raise RefusedCall(
            403,
            "permission_error",
            f"{method} {path} is not a model call: the sandbox forwards only "
            "POST /v1/messages and POST /v1/messages/count_tokens",
        )
    return billed


def check_request(body: bytes, policy: ModelPolicy, *, billed: bool) -> ModelCall:
    """The model call ``body`` makes, if ``policy`` lets it: RefusedCall (400) otherwise."""
    try:
        request = json.loads(body)
    except ValueError:
        request = None
    if not isinstance(request, dict):
        raise RefusedCall(400, "invalid_request_error", "the request body is not a JSON object")
    model = request.get("model")
    if not isinstance(model, str) or model not in policy.max_tokens:
        raise RefusedCall(
            400,
            "invalid_request_error",
            f"model {model!r} is not one this agent may use; it may use {policy.describe()}",
        )
    cap = policy.max_tokens[model]
    max_tokens = request.get("max_tokens")
    number = isinstance(max_tokens, int) and not isinstance(max_tokens, bool)
    tokens: int | None = max_tokens if number else None
    if billed and not (tokens is not None and 0 < tokens <= cap):
        raise RefusedCall(
            400,
            "invalid_request_error",
            f"max_tokens {max_tokens!r} is not within this agent's limit for {model} (1 to {cap})",
        )
    return ModelCall(model, tokens, billed)


@dataclass(frozen=True)
class Usage:
    """What a reply says it used (the Messages API's ``usage``)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_write_1h_tokens: int = 0  # of cache_creation_input_tokens, those kept an hour
    web_search_requests: int = 0

    @property
    def prompt_tokens(self) -> int:
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    def updated(self, usage: Any) -> Usage:
        """With the counts ``usage`` (a JSON object) gives: message_delta's are running
        totals, so each given count replaces the one before."""
        if not isinstance(usage, dict):
            return self
        counts = {
            "input_tokens": usage.get("input_tokens"),
            "output_tokens": usage.get("output_tokens"),
            "cache_creation_input_tokens": usage.get("cache_creation_input_tokens"),
            "cache_read_input_tokens": usage.get("cache_read_input_tokens"),
            "cache_write_1h_tokens": _get(usage, "cache_creation", "ephemeral_1h_input_tokens"),
            "web_search_requests": _get(usage, "server_tool_use", "web_search_requests"),
        }
        given = {k: v for k, v in counts.items() if isinstance(v, int) and v >= 0}
        return Usage(**{**self.as_dict(), **given})

    def as_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_write_1h_tokens": self.cache_write_1h_tokens,
            "web_search_requests": self.web_search_requests,
        }

    def __add__(self, other: Usage) -> Usage:
        mine, theirs = self.as_dict(), other.as_dict()
        return Usage(**{name: mine[name] + theirs[name] for name in mine})


def _get(data: dict[str, Any], outer: str, inner: str) -> Any:
    nested = data.get(outer)
    return nested.get(inner) if isinstance(nested, dict) else None


def prices_for(model: str) -> Prices:
    """The prices of the model a call names (not what the CLI would send instead)."""
    name = _plain(model)
    name = CLI_ALIASES.get(name, name) if name in _FAMILIES else name
    if name in PRICES:
        return PRICES[name]
    family = [p for known, p in PRICES.items() if _family(known) and _family(known) in name]
    return max(family or PRICES.values(), key=lambda p: (p.output, p.input))


_FAMILIES = frozenset({"opus", "sonnet", "haiku", "fable"})


def _family(model: str) -> str:
    words = model.split("-")
    return next((w for w in words if w.isalpha() and w != "claude"), "")


def price(model: str, usage: Usage) -> float:
    """What ``usage`` of ``model`` costs, in US dollars."""
    prices = prices_for(model)
    long_above, long = prices.long_above, prices.long
    if long is not None and long_above is not None and usage.prompt_tokens > long_above:
        prices = long
    write_1h = min(usage.cache_write_1h_tokens, usage.cache_creation_input_tokens)
    per_million = (
        usage.input_tokens * prices.input
        + usage.output_tokens * prices.output
        + (usage.cache_creation_input_tokens - write_1h) * prices.cache_write_5m
        + write_1h * prices.cache_write_1h
        + usage.cache_read_input_tokens * prices.cache_read
    )
    return per_million / 1_000_000 + usage.web_search_requests * WEB_SEARCH_USD


def worst_case(call: ModelCall, body_size: int) -> Usage:
    """A billed reply whose usage could not be read: every byte of the request a token, and
    every output token it could ask for."""
    cap = call.max_tokens if call.max_tokens is not None else CLI_UNKNOWN_MAX_TOKENS
    return Usage(input_tokens=body_size, output_tokens=cap)


@dataclass
class UsageReader:
    """Reads the usage of a model reply from its body as it passes, in any pieces: a stream
    of server-sent events (message_start's usage, then message_delta's running totals) or
    a JSON message. ``chunked``: the body has HTTP/1.1 chunked framing, taken off first."""

    streamed: bool
    chunked: bool = False
    usage: Usage | None = None
    _lines: bytearray = field(default_factory=bytearray)
    _framing: bytearray = field(default_factory=bytearray)
    _chunk_left: int = 0  # data bytes left in the current chunk, then its CRLF (-1: none)
    _overflow: bool = False

    def feed(self, data: bytes) -> None:
        if self.chunked:
            data = self._unframe(data)
        if self._overflow:
            return
        self._lines += data
        if len(self._lines) > BODY_LIMIT:  # not a reply this can read: worst case counted
            self.give_up()
            return
        if self.streamed and b"\n" in data:  # only then can a line have ended
            *complete, rest = bytes(self._lines).split(b"\n")
            self._lines[:] = rest
            for line in complete:
                self._event(line.rstrip(b"\r"))

    def give_up(self) -> None:
        """The body cannot be read (say, it is compressed): ``finish`` says None."""
        self._overflow = True
        self._lines.clear()

    def finish(self) -> Usage | None:
        """The usage read, once the body has ended (None: none could be read)."""
        if self._overflow:
            return None
        if self.streamed:
            self._event(bytes(self._lines))
        else:
            try:
                message = json.loads(bytes(self._lines))
            except ValueError:
                return None
            if isinstance(message, dict) and isinstance(message.get("usage"), dict):
                self.usage = Usage().updated(message["usage"])
        self._lines.clear()
        return self.usage

    def _event(self, line: bytes) -> None:
        if not line.startswith(b"data:") or b"message_" not in line:
            return  # content deltas and the rest carry no usage
        try:
            event = json.loads(line[5:])
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        if event.get("type") == "message_start" and isinstance(event.get("message"), dict):
            self.usage = Usage().updated(event["message"].get("usage"))
        elif event.get("type") == "message_delta":
            self.usage = (self.usage or Usage()).updated(event.get("usage"))

    def _unframe(self, data: bytes) -> bytes:
        """The chunk data in ``data``; the framing kept between calls."""
        out = bytearray()
        view = memoryview(data)
        while view:
            if self._chunk_left > 0:
                taken = view[: self._chunk_left]
                out += taken
                self._chunk_left -= len(taken)
                view = view[len(taken) :]
                if self._chunk_left == 0:
                    self._chunk_left = -2  # the CRLF after the data
                continue
            if self._chunk_left < 0:
                skip = min(-self._chunk_left, len(view))
                self._chunk_left += skip
                view = view[skip:]
                continue
            end = bytes(view).find(b"\n")
            if end < 0:
                self._framing += view
                if len(self._framing) > 4096:  # no chunk size line is this long
                    self._overflow = True
                    self._framing.clear()
                return bytes(out)
            self._framing += view[: end + 1]
            view = view[end + 1 :]
            size = bytes(self._framing).split(b";")[0].strip()
            self._framing.clear()
            try:
                self._chunk_left = int(size, 16)
            except ValueError:
                self._overflow = True
                return bytes(out)
            if self._chunk_left == 0:  # the last chunk: what follows is trailers
                self._chunk_left = -(1 << 62)
        return bytes(out)
