"""The harness tools about tasks and their humans: list_tasks, get_task_context, ask_human,
update_progress, log_decision. Every role is offered them."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from harness.agents.questions import NoHumanError
from harness.agents.services import Services
from harness.errors import ToolError
from harness.tools.registry import (
    Caller,
    EmptyInput,
    Seconds,
    TaskSlug,
    check_task,
    require_agent,
    tool,
)
from harness.tools.validation import Text, ToolInput


@tool(
    "list_tasks",
    "List the tasks: slug, created, description, dispatchCount (newest first).",
    EmptyInput,
)
async def list_tasks(svc: Services, caller: Caller | None, args: EmptyInput) -> dict[str, Any]:
    tasks = await svc.tasks.task_summaries()
    return {
        "tasks": [
            {
                "slug": t.slug,
                "created": t.created,
                "description": t.description,
                "dispatchCount": t.dispatch_count,
            }
            for t in tasks
            if caller is None or caller.sees(t.slug)
        ]
    }


class TaskSlugInput(ToolInput):
    taskSlug: TaskSlug  # noqa: N815


@tool(
    "get_task_context",
    "The reconstructed history of a task: its original request and every agent result.",
    TaskSlugInput,
)
async def get_task_context(
    svc: Services, caller: Caller | None, args: TaskSlugInput
) -> dict[str, Any]:
    check_task(caller, args.taskSlug)
    return {"taskSlug": args.taskSlug, "context": await svc.tasks.task_context(args.taskSlug)}


# ---------------------------------------------------------------- the task's humans


class AskHumanInput(ToolInput):
    question: Annotated[Text, Field(max_length=2_000, description="the question, self-contained")]
    options: (
        Annotated[
            list[Annotated[Text, Field(max_length=75)]],
            Field(max_length=10, description="possible answers (at most 10)"),
        ]
        | None
    ) = None
    timeoutSeconds: Seconds | None = Field(  # noqa: N815
        None, description="how long to wait for an answer"
    )


@tool(
    "ask_human",
    """Ask the humans of this task a question (posted in its Slack thread, or on the
    terminal) and wait for the answer. Give options for a choice (shown as buttons). Returns
    {answer, answeredBy}, or {timedOut: true} when nobody answered in time.""",
    AskHumanInput,
)
async def ask_human(svc: Services, caller: Caller | None, args: AskHumanInput) -> dict[str, Any]:
    caller = require_agent(caller, "ask_human")
    try:
        question, answer = await svc.humans.ask_human(
            caller.agent_id, args.question, tuple(args.options or ()), args.timeoutSeconds
        )
    except NoHumanError as exc:
        raise ToolError("NO_HUMAN_AVAILABLE", exc.message, exc.fix) from exc
    if answer is None:
        return {"timedOut": True, "questionId": question.question_id}
    return {"answer": answer.text, "answeredBy": answer.answered_by}


class UpdateProgressInput(ToolInput):
    message: Annotated[Text, Field(max_length=500, description="what you are doing now")]
    percent: Annotated[float, Field(ge=0, le=100, description="how much is done, 0-100")] | None = (
        None
    )


@tool(
    "update_progress",
    "Tell the humans how far you are: updates your status message in the thread.",
    UpdateProgressInput,
)
async def update_progress(
    svc: Services, caller: Caller | None, args: UpdateProgressInput
) -> dict[str, Any]:
    caller = require_agent(caller, "update_progress")
    record = await svc.lifecycle.report_progress(caller.agent_id, args.message, args.percent)
    assert record.progress is not None
    return {"recorded": True, "at": record.progress.at}


class LogDecisionInput(ToolInput):
    title: Annotated[Text, Field(max_length=200, description="the decision in a few words")]
    body: Annotated[Text, Field(max_length=5_000, description="the reasoning and alternatives")]


@tool(
    "log_decision",
    """Record a decision on this task (why, not just what); later agents see it in the
    task's history.""",
    LogDecisionInput,
)
async def log_decision(
    svc: Services, caller: Caller | None, args: LogDecisionInput
) -> dict[str, Any]:
    caller = require_agent(caller, "log_decision")
    task = await svc.tasks.log_decision(caller.agent_id, args.title, args.body)
    return {"logged": True, "decisionCount": len(task.decisions)}
