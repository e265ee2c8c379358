"""How a harness tool is declared: its name, description and input model (whose fields, with
their descriptions and limits, make the JSON schema the model sees) next to its handler, which
gets checked input and its caller. ``TOOLS`` holds every tool the handler modules declare."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from pydantic import Field

from harness.agents.services import Services
from harness.errors import ToolError
from harness.runtime.spec import ToolDeclaration
from harness.tools.validation import ToolInput, input_schema

# Patterns refuse blank text themselves, and keep their place in the schema the model sees.
AgentId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=32,
        pattern=r"^a[0-9a-f]{6,16}$",
        description="the agent's id, from draft_agent or list_agents",
        examples=["a1b2c3d4e5"],
    ),
]
TaskSlug = Annotated[
    str,
    Field(
        min_length=1,
        max_length=64,
        pattern=r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$",
        description="a task slug from list_tasks",
        examples=["add-a-settings-page"],
    ),
]
Seconds = Annotated[float, Field(ge=1, le=86_400)]


@dataclass(frozen=True)
class Caller:
    """The agent making a tool call."""

    agent_id: str
    role: str
    category: str
    task_slug: str
    depth: int
    # Whether its role may see and act on every task (mcp.allTasksCategories), not only its own.
    all_tasks: bool = False

    def sees(self, task_slug: str) -> bool:
        return self.all_tasks or task_slug == self.task_slug


Handler = Callable[[Services, Caller | None, Any], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input: type[ToolInput]
    handler: Handler

    def declaration(self) -> ToolDeclaration:
        return ToolDeclaration(self.name, self.description, input_schema(self.input))


class EmptyInput(ToolInput):
    pass


TOOLS: dict[str, Tool] = {}
H = TypeVar("H", bound=Handler)


def tool(name: str, description: str, input_model: type[ToolInput]) -> Callable[[H], H]:
    def register(handler: H) -> H:
        TOOLS[name] = Tool(name, " ".join(description.split()), input_model, handler)
        return handler

    return register


def require_agent(caller: Caller | None, tool_name: str) -> Caller:
    if caller is None:
        raise ToolError(
            "INVALID_AGENT_STATE",
            f"{tool_name} needs to know which agent is calling, and this call names none",
            "call it from an agent run by the harness",
        )
    return caller


# Tasks are apart: an agent sees and acts on its own task only, unless its role's category is
# one of mcp.allTasksCategories. The harness itself (no caller) sees every task.


def check_task(caller: Caller | None, task_slug: str) -> None:
    """Refuses a task that is not the caller's (the same answer for one that does not exist)."""
    if caller is not None and not caller.sees(task_slug):
        raise ToolError(
            "PERMISSION_DENIED",
            f"task {task_slug} is not yours: an agent works on its own task, {caller.task_slug}",
            "leave taskSlug out to work on your own task; a person starts other tasks",
        )


async def check_agent(svc: Services, caller: Caller | None, agent_id: str) -> None:
    """Refuses an agent of another task as if it did not exist."""
    if caller is None or caller.all_tasks:
        return
    live = svc.lifecycle.agent(agent_id)
    if live is not None:
        if live.task_slug == caller.task_slug:
            return
    elif any(d.agent_id == agent_id for d in (await svc.tasks.task(caller.task_slug)).dispatches):
        return
    raise ToolError(
        "AGENT_NOT_FOUND",
        f"no agent {agent_id} in your task {caller.task_slug}",
        "call list_agents for the agents of your task",
    )
