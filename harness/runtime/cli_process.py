"""The CLI's process under a ``ClaudeSDKClient``, which the SDK keeps to itself, and closing
a client so that nothing of that process is left open."""

from __future__ import annotations

from typing import Any

from claude_agent_sdk import ClaudeSDKClient


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
