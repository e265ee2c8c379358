"""A CLI under a ``ClaudeSDKClient`` beyond what the SDK offers: priming a waiting CLI's
first turn (a control request the SDK keeps to itself), and what a run says when the CLI
failed."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Iterable
from typing import Any

from claude_agent_sdk import ClaudeSDKClient

from harness.errors import HarnessError
from harness.runtime.binding import CallHold

logger = logging.getLogger(__name__)

PRIME_TIMEOUT = 30.0  # seconds
# What the priming turn says; its model calls are held, so no model ever reads it.
PRIMING_PROMPT = "."


async def prime(client: ClaudeSDKClient, hold: CallHold) -> bool:
    """Has a connected CLI that waits for its prompt run its first turn's code before the
    prompt rather than after it. First it works out its context (system prompt, tools,
    memory files, the token count: what ``/context`` shows) as a control request; then it
    runs a priming turn whose model calls ``hold`` has its sandbox's proxy answer with a
    refusal, unsent, and the turn is rewound out of the conversation. Nothing reaches the
    model and the first request is the same as an unprimed CLI's. False, and the CLI left as
    it was, when it does not work out its context in time; HarnessError when the priming
    turn failed or could not be rewound (the CLI is then no use: its caller closes it)."""
    try:
        async with asyncio.timeout(PRIME_TIMEOUT):
            await client.get_context_usage()
    # The SDK raises a bare Exception for a control request's error reply or its timeout.
    except Exception as exc:  # noqa: BLE001
        logger.warning("a spare agent's CLI did not work out its context ahead: %s", exc)
        return False
    await _priming_turn(client, hold)
    return True


async def _priming_turn(client: ClaudeSDKClient, hold: CallHold) -> None:
    """A turn the CLI runs in full up to its model call (attachments, hooks, the request
    built and sent), the calls held by the proxy, then cut from the conversation."""
    marker = str(uuid.uuid4())

    async def message() -> AsyncIterator[dict[str, Any]]:
        user = {"role": "user", "content": PRIMING_PROMPT}
        yield {"type": "user", "message": user, "parent_tool_use_id": None, "uuid": marker}

    hold.on = True
    try:
        async with asyncio.timeout(PRIME_TIMEOUT):
            await client.query(message())
            async for _message in client.receive_response():
                pass  # its turn ends with a result: the held call's error
            # The SDK keeps its control requests to itself; this one cuts the turn out.
            query: Any = getattr(client, "_query", None)
            reply = await query._send_control_request(
                {"subtype": "rewind_conversation", "target_message_uuid": marker}
            )
    # The SDK raises a bare Exception for a control request's error reply or its timeout.
    except Exception as exc:
        raise HarnessError(
            f"a spare agent's CLI could not run its priming turn: {exc}",
            fix="dispatches start the CLI anew meanwhile",
        ) from exc
    finally:
        hold.on = False
    if not (isinstance(reply, dict) and reply.get("rewound") is True):
        raise HarnessError(
            f"a spare agent's CLI did not rewind its priming turn: {reply!r}",
            fix="dispatches start the CLI anew meanwhile",
        )


def cli_failed(cause: object, stderr_tail: Iterable[str]) -> str:
    """What a run's record says when the CLI failed: the SDK's error and the CLI's last words."""
    said = f"the Claude Code CLI failed: {cause}"
    if lines := [line.strip() for line in stderr_tail]:
        said += " (stderr: " + " | ".join(lines) + ")"
    return said
