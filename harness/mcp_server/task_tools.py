"""The MCP server's tools about tasks and their humans: list_tasks, show_task,
get_task_context, get_task_diff, list_questions, answer_question."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from harness.agents.questions import Question, answer_for, said
from harness.errors import ToolError
from harness.mcp_server.access import Person
from harness.mcp_server.agent_tools import EmptyInput
from harness.mcp_server.service import McpService, McpTool, Report
from harness.serialise import to_json
from harness.tasks.model import TaskSummary
from harness.tools.registry import TaskSlug
from harness.tools.validation import Text, ToolInput


def _summary_json(s: TaskSummary) -> dict[str, Any]:
    return {
        "slug": s.slug,
        "created": s.created,
        "description": s.description,
        "status": s.status,
        "costUsd": s.cost_usd,
        "dispatchCount": s.dispatch_count,
        "requester": s.requester,
        "thread": {"channel": s.thread.channel, "threadTs": s.thread.thread_ts}
        if s.thread
        else None,
        "pullRequest": s.pull_request,
    }


async def list_tasks(
    svc: McpService, person: Person, args: EmptyInput, report: Report
) -> dict[str, Any]:
    summaries = await svc.visible(person, await svc.orchestrator.tasks.task_summaries())
    return {"tasks": [_summary_json(s) for s in summaries]}


class TaskSlugInput(ToolInput):
    taskSlug: TaskSlug  # noqa: N815


async def show_task(
    svc: McpService, person: Person, args: TaskSlugInput, report: Report
) -> dict[str, Any]:
    task = await svc.task_for(person, args.taskSlug)
    return {"taskSlug": task.slug, "task": to_json(task)}


async def get_task_context(
    svc: McpService, person: Person, args: TaskSlugInput, report: Report
) -> dict[str, Any]:
    await svc.task_for(person, args.taskSlug)
    return {"taskSlug": args.taskSlug, "context": await task_context(svc, args.taskSlug)}


async def task_context(svc: McpService, slug: str) -> str:
    return await svc.orchestrator.tasks.task_context(slug)


async def task_diff(svc: McpService, slug: str) -> dict[str, Any]:
    """The diff of all the task changed, as its latest agent with changes left it."""
    task = await svc.orchestrator.tasks.task(slug)
    latest = next((d for d in reversed(task.dispatches) if d.diff_file), None)
    if latest is None:
        return {"taskSlug": slug, "agentId": None, "branch": None, "diffStat": None, "diff": None}
    return {
        "taskSlug": slug,
        "agentId": latest.agent_id,
        "branch": latest.branch,
        "headCommit": latest.head_commit,
        "diffStat": latest.diff_stat,
        "diff": await svc.orchestrator.tasks.diff(slug, latest),
    }


async def get_task_diff(
    svc: McpService, person: Person, args: TaskSlugInput, report: Report
) -> dict[str, Any]:
    await svc.task_for(person, args.taskSlug)
    return await task_diff(svc, args.taskSlug)


class ListQuestionsInput(ToolInput):
    taskSlug: TaskSlug | None = None  # noqa: N815


def _mine(svc: McpService, person: Person, question: Question) -> bool:
    """The caller's tasks' questions: all for the local user, else those of tasks they
    asked for (all for an admin)."""
    return person.user is None or svc.orchestrator.humans.may_decide(
        person.user, question.requester
    )


def _question_json(question: Question) -> dict[str, Any]:
    return {
        "questionId": question.question_id,
        "kind": question.kind,
        "text": question.text,
        "options": list(question.options),
        "agentId": question.agent_id,
        "role": question.role,
        "taskSlug": question.task_slug,
        "askedAt": question.asked_at,
        "timeoutSeconds": question.timeout_seconds,
    }


async def list_questions(
    svc: McpService, person: Person, args: ListQuestionsInput, report: Report
) -> dict[str, Any]:
    pending = svc.orchestrator.humans.pending_questions(args.taskSlug)
    return {"questions": [_question_json(q) for q in pending if _mine(svc, person, q)]}


class AnswerQuestionInput(ToolInput):
    questionId: Annotated[  # noqa: N815
        str, Field(pattern=r"^q[0-9a-f]{2,32}$", description="from list_questions")
    ]
    answer: Annotated[
        Text,
        Field(
            max_length=4_000,
            description="for an approval: allow, allow for this task, deny, or deny: <reason>; "
            "for a question: the answer (one of its options, or your own words)",
        ),
    ]


async def answer_question(
    svc: McpService, person: Person, args: AnswerQuestionInput, report: Report
) -> dict[str, Any]:
    orch = svc.orchestrator
    question = next(
        (q for q in orch.humans.pending_questions() if q.question_id == args.questionId), None
    )
    if question is not None:  # anyone who sees the task answers a question, as in its thread
        try:
            await svc.task_for(person, question.task_slug)
        except ToolError:
            question = None
    if question is None:
        raise ToolError(
            "INVALID_AGENT_STATE",
            f"no open question {args.questionId}: it was answered, timed out or its agent ended",
            "call list_questions for the open ones",
        )
    answer = answer_for(question, args.answer, person.name)
    if answer is None:
        raise ToolError(
            "INVALID_INPUT",
            f"{args.answer!r} does not decide the approval",
            "answer allow, allow for this task, or deny (deny: <reason>)",
        )
    if not orch.humans.answer_question(question.question_id, answer):  # NotAllowedError: refused
        raise ToolError(
            "INVALID_AGENT_STATE",
            f"question {question.question_id} closed before the answer",
            "call list_questions for the open ones",
        )
    return {
        "answered": True,
        "questionId": question.question_id,
        "taskSlug": question.task_slug,
        "answer": said(answer),
    }


TASK_TOOLS = (
    McpTool(
        "list_tasks",
        "The tasks you see, newest first: slug, created, description, status, cost, "
        "requester, Slack thread.",
        EmptyInput,
        list_tasks,
        read_only=True,
    ),
    McpTool(
        "show_task",
        "One task as task.json keeps it: every dispatch with its status, cost and result.",
        TaskSlugInput,
        show_task,
        read_only=True,
    ),
    McpTool(
        "get_task_context",
        "A task's reconstructed history: its request and every agent's result.",
        TaskSlugInput,
        get_task_context,
        read_only=True,
    ),
    McpTool(
        "get_task_diff",
        "What the task changed in its repository: branch, head commit, diff stat and diff.",
        TaskSlugInput,
        get_task_diff,
        read_only=True,
    ),
    McpTool(
        "list_questions",
        "The approvals and questions the agents of your tasks wait on (of one task with taskSlug).",
        ListQuestionsInput,
        list_questions,
        read_only=True,
    ),
    McpTool(
        "answer_question",
        "Answer an agent's question, or decide an approval (the task's requester or an "
        "admin): allow, allow for this task, deny, deny: <reason>.",
        AnswerQuestionInput,
        answer_question,
    ),
)
