"""The scripted model's answers as the Messages API gives them: the assistant message a turn
becomes, its server-sent events block by block, and error responses."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from aiohttp import web

from harness.testing.model_turns import Turn, chunks, sse


def content(turn: Turn) -> list[dict[str, Any]]:
    """The turn's content blocks: its text, then its tool calls."""
    blocks: list[dict[str, Any]] = []
    if turn.text:
        blocks.append({"type": "text", "text": turn.text})
    for call in turn.tool_calls:
        blocks.append(
            {
                "type": "tool_use",
                "id": call.id or f"toolu_{uuid.uuid4().hex[:24]}",
                "name": call.name,
                "input": call.input,
            }
        )
    return blocks


def output_tokens(blocks: Sequence[Mapping[str, Any]]) -> int:
    return max(1, len(json.dumps(list(blocks))) // 4)


def assistant_message(turn: Turn, model: str, input_tokens: int) -> dict[str, Any]:
    """The whole message a turn becomes (ids unique: the CLI merges messages sharing one)."""
    blocks = content(turn)
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": turn.stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens(blocks)},
    }


async def stream_block(response: web.StreamResponse, index: int, block: Mapping[str, Any]) -> None:
    if block["type"] == "text":
        start: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": part} for part in chunks(block["text"])]
    else:
        start = {**block, "input": {}}
        deltas = [
            {"type": "input_json_delta", "partial_json": part}
            for part in chunks(json.dumps(block["input"]))
        ]
    await response.write(
        sse(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
    )
    for delta in deltas:
        await response.write(
            sse(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        )
    await response.write(sse("content_block_stop", {"type": "content_block_stop", "index": index}))


ERROR_KINDS = {429: "rate_limit_error", 529: "overloaded_error"}


def error_response(status: int, kind: str, message: str, *, retry: bool = False) -> web.Response:
    # x-should-retry: false, or the CLI retries a 500 with backoff for about a minute.
    return web.json_response(
        {"type": "error", "error": {"type": kind, "message": message}},
        status=status,
        headers={} if retry else {"x-should-retry": "false"},
    )
