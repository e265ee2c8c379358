"""The scripted model's vocabulary: the turns a script returns, the requests it reads, and
the server-sent events that carry a turn to the Claude Code CLI. Pure."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

STRUCTURED_OUTPUT_TOOL = "StructuredOutput"
DEFAULT_MODEL = "claude-sonnet-4-5"
_REMINDER = "<system-reminder>"
_CHUNK = 200  # characters per streamed delta


@dataclass(frozen=True)
class ToolCall:
    """One ``tool_use`` block of an assistant turn."""

    name: str
    input: dict[str, Any]
    id: str | None = None  # None: a fresh unique ``toolu_...`` id


@dataclass(frozen=True)
class Turn:
    """One assistant response: optional text, then tool calls (several = parallel tool use)."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    # After message_start, wait this long (or until the client goes away) before the rest.
    stall_seconds: float = 0.0
    # Answer with this HTTP error instead (0: none), as a failing model API does; the CLI
    # retries it and asks again.
    error_status: int = 0

    @classmethod
    def say(cls, text: str) -> Turn:
        return cls(text=text)

    @classmethod
    def fail(cls, status: int) -> Turn:
        """An HTTP error the CLI retries (500, 529 overloaded, ...)."""
        return cls(error_status=status)

    @classmethod
    def call(cls, name: str, /, **tool_input: Any) -> Turn:
        return cls(tool_calls=(ToolCall(name, dict(tool_input)),))

    @classmethod
    def finish(
        cls,
        summary: str,
        changes: Sequence[str] = (),
        issues: Sequence[str] = (),
        questions: Sequence[str] = (),
        *,
        text: str = "",
    ) -> Turn:
        """The final ``StructuredOutput`` call with the harness result shape."""
        result = {
            "summary": summary,
            "changes": list(changes),
            "issues": list(issues),
            "questions": list(questions),
        }
        return cls(text=text, tool_calls=(ToolCall(STRUCTURED_OUTPUT_TOOL, result),))

    @property
    def stop_reason(self) -> str:
        return "tool_use" if self.tool_calls else "end_turn"


# --------------------------------------------------------------------------- requests


@dataclass(frozen=True)
class ToolResultView:
    """A ``tool_result`` block, with the name and input of the ``tool_use`` it answers."""

    tool_use_id: str
    tool_name: str | None
    text: str
    is_error: bool
    tool_input: dict[str, Any] = field(default_factory=dict)

    def json(self) -> Any:
        """The text parsed as JSON, or None when it is not JSON."""
        try:
            return json.loads(self.text)
        except ValueError:
            return None


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [block for block in content if isinstance(block, dict)]
    return []


def _text_of(content: Any, *, skip_reminders: bool = False) -> str:
    parts = []
    for block in _blocks(content):
        text = block.get("text")
        if block.get("type") != "text" or not isinstance(text, str):
            continue
        if skip_reminders and text.lstrip().startswith(_REMINDER):
            continue
        parts.append(text)
    return "\n".join(parts)


@dataclass(frozen=True)
class ModelRequest:
    """One recorded ``POST /v1/messages``."""

    body: dict[str, Any]
    headers: dict[str, str]
    received_at: float
    # Not the agent's conversation (e.g. the CLI's session-title query): answered canned.
    is_side_request: bool = False
    index: int = 0  # position in ScriptedModel.requests

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages = self.body.get("messages")
        return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []

    @property
    def system_text(self) -> str:
        """All system text: the ``system`` blocks, then any ``role: "system"`` messages."""
        parts = [_text_of(self.body.get("system"))]
        parts += [_text_of(m.get("content")) for m in self.messages if m.get("role") == "system"]
        return "\n".join(part for part in parts if part)

    @property
    def tools(self) -> list[dict[str, Any]]:
        tools = self.body.get("tools")
        return [t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []

    @property
    def tool_names(self) -> list[str]:
        return [str(t.get("name")) for t in self.tools]

    @property
    def is_structured(self) -> bool:
        return STRUCTURED_OUTPUT_TOOL in self.tool_names

    def _user_texts(self) -> list[str]:
        texts = [
            _text_of(m.get("content"), skip_reminders=True)
            for m in self.messages
            if m.get("role") == "user"
        ]
        return [text for text in texts if text]

    @property
    def first_user_text(self) -> str:
        """The first user prompt (without the CLI's ``<system-reminder>`` blocks)."""
        texts = self._user_texts()
        return texts[0] if texts else ""

    @property
    def last_user_text(self) -> str:
        """The latest user text (tool results are not user text)."""
        texts = self._user_texts()
        return texts[-1] if texts else ""

    def _tool_uses(self) -> dict[str, dict[str, Any]]:
        uses: dict[str, dict[str, Any]] = {}
        for message in self.messages:
            if message.get("role") != "assistant":
                continue
            for block in _blocks(message.get("content")):
                if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                    uses[block["id"]] = block
        return uses

    def _results_in(self, messages: Sequence[dict[str, Any]]) -> list[ToolResultView]:
        uses = self._tool_uses()
        views = []
        for message in messages:
            if message.get("role") != "user":
                continue
            for block in _blocks(message.get("content")):
                if block.get("type") != "tool_result":
                    continue
                use_id = str(block.get("tool_use_id", ""))
                use = uses.get(use_id, {})
                tool_input = use.get("input")
                views.append(
                    ToolResultView(
                        tool_use_id=use_id,
                        tool_name=use.get("name") if isinstance(use.get("name"), str) else None,
                        text=_text_of(block.get("content")),
                        is_error=bool(block.get("is_error")),
                        tool_input=tool_input if isinstance(tool_input, dict) else {},
                    )
                )
        return views

    @property
    def tool_results(self) -> list[ToolResultView]:
        """The results answering the previous turn (those in the last user message)."""
        users = [m for m in self.messages if m.get("role") == "user"]
        return self._results_in(users[-1:])

    @property
    def all_tool_results(self) -> list[ToolResultView]:
        return self._results_in(self.messages)

    def summary(self) -> str:
        """One line for logs and timeout messages."""
        kind = "side" if self.is_side_request else "main"
        last = self.tool_results
        tail = (
            f"results={[r.tool_name for r in last]}"
            if last
            else f"user={self.last_user_text!r:.60}"
        )
        return f"#{self.index} {kind} tools={self.tool_names} {tail}"


Script = Callable[[ModelRequest], Turn | Awaitable[Turn]]
Predicate = Callable[[ModelRequest], bool]


def is_side_request(body: Mapping[str, Any]) -> bool:
    """The CLI's own queries (session title, ...) ask for a JSON format through
    ``output_config.format`` and carry no ``metadata``; the agent's turns always do."""
    output_config = body.get("output_config")
    if isinstance(output_config, dict) and "format" in output_config:
        return True
    return "metadata" not in body


def _instance(schema: Any) -> Any:
    """A small value matching a JSON schema (enough for the CLI's side queries)."""
    if not isinstance(schema, dict):
        return "Scripted"
    if "enum" in schema and isinstance(schema["enum"], list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0] if kind else "string"
    if kind == "object":
        properties = schema.get("properties") or {}
        required = schema.get("required") or list(properties)
        return {name: _instance(properties.get(name)) for name in required}
    if kind == "array":
        return []
    if kind in ("number", "integer"):
        return 0
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return "Scripted session"


def side_turn(body: Mapping[str, Any]) -> Turn:
    output_config = body.get("output_config")
    fmt = output_config.get("format") if isinstance(output_config, dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        return Turn.say(json.dumps(_instance(fmt.get("schema"))))
    return Turn.say("OK")


def sse(event: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def chunks(text: str) -> list[str]:
    return [text[i : i + _CHUNK] for i in range(0, len(text), _CHUNK)] or [""]
