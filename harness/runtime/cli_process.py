"""The CLI's process under a ``ClaudeSDKClient``, which the SDK keeps to itself, and closing
a client so that nothing of that process is left open."""

from __future__ import annotations

import contextlib
from typing import Any

from claude_agent_sdk import ClaudeSDKClient


def sdk_process(client: object) -> Any:
    """The CLI's process of a ``ClaudeSDKClient`` (its subprocess transport's, an anyio
    ``Process``); None when it has none (not started, or closed)."""
    return getattr(getattr(client, "_transport", None), "_process", None)


async def disconnect(client: ClaudeSDKClient) -> None:
    """``client.disconnect()``, then the CLI's pipes closed. The SDK's close ends the process
    but leaves its stdout (and an unread stderr) open; while a process of its sandbox still
    holds them they never end, and the loop's transport is left for the garbage collector
    to close, warning, at whatever later moment it runs."""
    process = sdk_process(client)
    try:
        await client.disconnect()
    finally:
        if process is not None:
            for stream in (process.stdin, process.stdout, process.stderr):
                if stream is not None:
                    with contextlib.suppress(Exception):  # closed already: nothing left
                        await stream.aclose()
