"""The CLI's process under a ``ClaudeSDKClient``, which the SDK keeps to itself: closing a
client so that nothing of that process is left open, priming a waiting CLI's first turn, and
what a run says when the CLI failed."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from claude_agent_sdk import ClaudeSDKClient, ClaudeSDKError

logger = logging.getLogger(__name__)

PRIME_TIMEOUT = 30.0  # seconds


def sdk_process(client: object) -> Any:
    """The CLI's process of a ``ClaudeSDKClient`` (its subprocess transport's, an anyio
    ``Process``); None when it has none (not started, or closed)."""
    return getattr(getattr(client, "_transport", None), "_process", None)


async def disconnect(client: ClaudeSDKClient) -> None:
    """``client.disconnect()``, then the loop's transport of the CLI's process closed. The
    SDK's close ends the process but leaves its stdout (and an unread stderr) open, and
    anyio's ``aclose`` of a read stream does not close its pipe: while a process of its
    sandbox still holds them they never end, and the transport is left for the garbage
    collector to close, warning, at whatever later moment it runs. Closing the transport
    closes its pipes (and kills the process if the SDK could not end it)."""
    process = sdk_process(client)
    try:
        await client.disconnect()
    finally:
        transport = getattr(getattr(process, "_process", None), "_transport", None)
        if transport is not None:
            transport.close()


async def prime(client: ClaudeSDKClient) -> bool:
    """Has a connected CLI that waits for its prompt work out its context (system prompt,
    tools, memory files, the token count: what ``/context`` shows) as a control request, so
    the code its first turn runs is compiled and its caches are filled before the prompt
    rather than after it. Nothing enters the conversation: the first request to the model
    is the same. False, and the CLI left as it was, when it does not answer in time."""
    try:
        async with asyncio.timeout(PRIME_TIMEOUT):
            await client.get_context_usage()
    # The SDK raises a bare Exception for a control request's error reply or its timeout.
    except Exception as exc:  # noqa: BLE001
        logger.warning("a spare agent's CLI did not work out its context ahead: %s", exc)
        return False
    return True


def cli_failed(exc: ClaudeSDKError, stderr_tail: Iterable[str]) -> str:
    """What a run's record says when the CLI failed: the SDK's error and the CLI's last words."""
    said = f"the Claude Code CLI failed: {exc}"
    if lines := [line.strip() for line in stderr_tail]:
        said += " (stderr: " + " | ".join(lines) + ")"
    return said
