"""The harness tool that carries files back to the humans: share_file. Every role is offered
it (see ``registry`` for how a tool is declared)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from harness.agents.services import Services
from harness.runtime.attachments import human_size
from harness.tools.registry import Caller, require_agent, tool
from harness.tools.validation import Text, ToolInput


class ShareFileInput(ToolInput):
    path: Annotated[
        Text,
        Field(
            max_length=1_000,
            description="the file, relative to your working folder (or absolute, inside it)",
            examples=["reports/coverage.html"],
        ),
    ]
    title: Annotated[
        str | None, Field(max_length=200, description="shown with the file; default: its name")
    ] = None


@tool(
    "share_file",
    """Share a file of your working folder (an image, a report, a log) with the people of
    your task: it appears in the task's thread. Within the configured size limit; the path
    must be inside your working folder.""",
    ShareFileInput,
)
async def share_file(svc: Services, caller: Caller | None, args: ShareFileInput) -> dict[str, Any]:
    caller = require_agent(caller, "share_file")
    shared = await svc.files.share_file(caller.agent_id, args.path, args.title)
    return {"shared": True, "name": shared.name, "size": human_size(len(shared.content))}
