"""Plan first, and the model a request picks, in a Slack thread.

A request (or follow-up) that starts with ``plan first:``, one from the Plan shortcut, or one
to a role with ``planFirst: true`` runs read-only and posts its plan as its result, under
*Approve and implement*, *Request changes* and a model menu. Approval (the requester or an
admin, kept in the ledger before it is acked, once per plan) starts the role that planned,
now free to change files, with the plan in its context (the task's earlier results) and the
model picked in the menu. Until a plan is approved, a reply in its thread goes back to the
planner, read-only again: *Request changes* asks for that reply. ``model:<name>`` in a
request picks the agent's model among those its role allows.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from bot.blocks import (
    UNSEEN,
    ActionsBlock,
    ButtonElement,
    OptionObject,
    SelectElement,
    SlackMessage,
    context_block,
    escape,
    mention,
)
from bot.click_agents import start_for_click
from bot.clicks import Clicks, KeptClick, shown_message, started_since, take_once
from harness.agents.directives import (
    APPROVED,
    CHANGES_ASKED,
    Directives,
    allowed_models,
)
from harness.agents.dispatching import AgentHandle
from harness.agents.orchestrator import Orchestrator
from harness.config.roles import Role
from harness.errors import AgentNotFoundError, HarnessError
from harness.runtime.attachments import Attachment, LeftOut
from harness.tasks.model import DispatchRecord, Task, ThreadRef

if TYPE_CHECKING:
    from bot.conversations import Conversations
    from bot.parsing import UserMessage

logger = logging.getLogger(__name__)

APPROVE_ACTION = "harness_plan_approve"
CHANGES_ACTION = "harness_plan_changes"
MODEL_ACTION = "harness_plan_model"
PLAN_BLOCK = "harness_plan"


async def draft_request(
    orchestrator: Orchestrator,
    directives: Directives,
    role: str,
    prompt: str,
    *,
    task_slug: str,
    requested_by: str,
    attachments: Sequence[Attachment] = (),
    left_out: Sequence[LeftOut] = (),
) -> AgentHandle:
    """A person's request (or follow-up) in a thread, drafted with what it asked for: its
    model, and a plan first (asked for, or its role's ``planFirst``). After a plan not yet
    approved, it asks the planner for changes instead, read-only again."""
    task = await orchestrator.tasks.task(task_slug)
    plan = latest_plan(task)
    if plan is not None:  # the reply says what should change in the plan
        role, prompt = plan.role, CHANGES_ASKED.format(who=requested_by, what=prompt)
    planning = plan is not None or directives.plan_first or orchestrator.role(role).plan_first
    model = directives.model or (plan.model if plan is not None and plan.model else None)
    return await orchestrator.draft(
        role,
        prompt,
        task_slug=task_slug,
        requested_by=requested_by,
        model=model,
        plan=planning,
        attachments=attachments,
        left_out=left_out,
    )


def unseen(message: UserMessage) -> str:
    """What a message with nothing to do in it is told: that it showed nothing, or, when it
    held only directives (``model:opus`` alone), to say what the agent should do after them."""
    asked = message.directives
    if message.invisible or asked == Directives():
        return UNSEEN
    words = ["plan first:"] * asked.plan_first + [f"model:{asked.model}"] * bool(asked.model)
    said = " ".join(words)
    return (
        f"Say what the agent should do after `{said}` (for example `{said} fix the login "
        "form`): your message had nothing else, so nothing started."
    )


def latest_plan(task: Task) -> DispatchRecord | None:
    """The task's plan waiting for approval: its latest agent a person asked for, when that
    one planned (None: no plan waits)."""
    top = [d for d in task.dispatches if d.parent_id is None]
    return top[-1] if top and top[-1].plan else None


def plan_buttons_for(
    messages: list[SlackMessage], record: DispatchRecord, roles: Mapping[str, Role]
) -> list[SlackMessage]:
    """A result's messages, with the plan's buttons when it is a plan that was made."""
    if not record.plan or record.status != "completed":
        return messages
    return with_plan_buttons(messages, record, models_of(roles, record))


def models_of(roles: Mapping[str, Role], record: DispatchRecord) -> tuple[str, ...]:
    """The models an agent of ``record``'s role may be run with (none: its role is gone)."""
    role = roles.get(record.role)
    return allowed_models(role) if role is not None else ()


def with_plan_buttons(
    messages: list[SlackMessage], record: DispatchRecord, models: Sequence[str]
) -> list[SlackMessage]:
    """A plan's result with *Approve and implement*, *Request changes* and, when its role
    lets a request pick, a menu of models for the implementation."""
    elements: list[ButtonElement | SelectElement] = [
        {
            "type": "button",
            "action_id": APPROVE_ACTION,
            "style": "primary",
            "text": {"type": "plain_text", "text": "Approve and implement"},
            "value": record.agent_id,
        },
        {
            "type": "button",
            "action_id": CHANGES_ACTION,
            "text": {"type": "plain_text", "text": "Request changes"},
            "value": record.agent_id,
        },
    ]
    if len(models) > 1:
        menu: SelectElement = {
            "type": "static_select",
            "action_id": MODEL_ACTION,
            "placeholder": {"type": "plain_text", "text": "Model"},
            "options": [_option(name) for name in models],
        }
        if record.model in models:
            menu["initial_option"] = _option(record.model or "")
        elements.append(menu)
    buttons: ActionsBlock = {"type": "actions", "block_id": PLAN_BLOCK, "elements": elements}
    last = messages[-1]
    return [*messages[:-1], {"text": last["text"], "blocks": [*last["blocks"], buttons]}]


def _option(name: str) -> OptionObject:
    return {"text": {"type": "plain_text", "text": name[:75]}, "value": name}


def picked_model(body: Mapping[str, Any]) -> str | None:
    """The model picked in the plan's menu, from the click's ``state`` (None: none)."""
    values = ((body.get("state") or {}).get("values") or {}).get(PLAN_BLOCK) or {}
    selected = (values.get(MODEL_ACTION) or {}).get("selected_option") or {}
    value = selected.get("value") if isinstance(selected, Mapping) else None
    return value if isinstance(value, str) and value else None


def plan_done(message: Mapping[str, Any], note: str) -> SlackMessage:
    """The plan's message once it was approved: the buttons give way to who did, and what."""
    blocks = [b for b in message.get("blocks") or [] if b.get("block_id") != PLAN_BLOCK]
    return {"text": str(message.get("text", "")), "blocks": [*blocks, context_block(note)]}


async def _plan_in(
    conversations: Conversations, thread: ThreadRef, agent_id: str, user: str
) -> tuple[Task, DispatchRecord] | str:
    """The thread's task and its plan ``agent_id``, when ``user`` may decide on it; why
    not, otherwise."""
    orchestrator = conversations.orchestrator
    slug = conversations.index.slug(thread)
    try:
        task = await orchestrator.tasks.task(slug) if slug else None
    except HarnessError:
        task = None
    record = next((d for d in task.dispatches if d.agent_id == agent_id), None) if task else None
    if task is None or record is None or not record.plan:
        return "This button belongs to a plan of another thread's task."
    if not orchestrator.humans.may_decide(user, task.requester):
        who = mention(task.requester) if task.requester else "the person who asked"
        return f"Only {who} (or an admin) can approve this plan or ask for changes."
    if latest_plan(task) != record:
        return "A newer plan (or its implementation) followed this one in the thread."
    if record.status != "completed":
        return f"This plan's agent {record.status}: there is no plan to approve."
    return task, record


async def approve(
    conversations: Conversations,
    thread: ThreadRef,
    agent_id: str,
    user: str,
    body: Mapping[str, Any],
) -> str | None:
    """*Approve and implement* under the plan ``agent_id``: its role starts on it, once.
    Why not, when it cannot (None when it was taken on)."""
    found = await _plan_in(conversations, thread, agent_id, user)
    if isinstance(found, str):
        return found
    task, record = found
    model = picked_model(body) or record.model
    role = conversations.orchestrator.roles.get(record.role)
    if role is None:
        return f"The {record.role} role is no longer in the harness's roles."
    if model is not None and model not in allowed_models(role):
        return f"The {role.name} role does not allow the model `{model}`."
    if conversations.closing:
        return "I am shutting down; press it again once I am back."
    notice = shown_message(body.get("message"))  # the plan's message, to mark it approved
    extra = {"model": model} | ({"notice": notice} if notice else {})
    click = await take_once(conversations.ledger, "plan", agent_id, user, thread, extra,
                            already="This plan has already been approved.")  # fmt: skip
    if isinstance(click, str):
        return click
    _enqueue(conversations, click, record, task.slug)
    return None


async def request_changes(
    conversations: Conversations,
    thread: ThreadRef,
    agent_id: str,
    user: str,
    body: Mapping[str, Any],
) -> str | None:
    """*Request changes* under a plan: the thread is asked what should change; the reply
    goes back to the planner (``draft_request``). Why not, when it cannot."""
    found = await _plan_in(conversations, thread, agent_id, user)
    if isinstance(found, str):
        return found
    text = (
        f"✏️ {mention(user)}: what should change in the plan? Reply in this thread; the "
        f"{escape(found[1].role)} revises it, still changing nothing."
    )
    await conversations.poster.post(thread, text)
    return None


def _enqueue(
    conversations: Conversations, click: KeptClick, plan: DispatchRecord, slug: str
) -> None:
    model = click.extra.get("model")

    def draft() -> Awaitable[AgentHandle]:
        return conversations.orchestrator.draft(
            plan.role,
            f"{plan.prompt}\n\n{APPROVED.format(who=click.user)}",
            task_slug=slug,
            requested_by=click.user,
            model=model if isinstance(model, str) else None,
        )

    def marked(notice: dict[str, Any], handle: AgentHandle) -> SlackMessage:
        what = f"{escape(handle.role)} `{escape(handle.agent_id)}` implements it"
        return plan_done(notice, f"✅ {mention(click.user)} approved the plan: {what}")

    refused, name = "The plan was not implemented", f"implement plan {click.subject}"
    start_for_click(
        conversations, click, draft, slug=slug, refused=refused, marked=marked, name=name
    )


async def resume_approval(conversations: Conversations, clicks: Clicks, click: KeptClick) -> None:
    """An approval kept before a stop: its implementation starts now, unless an agent
    started on the task since the click (the watcher says how that one ended)."""
    orchestrator = conversations.orchestrator
    slug = conversations.index.slug(click.thread)
    try:
        record = await orchestrator.record(click.subject)
        task = await orchestrator.tasks.task(slug) if slug else None
    except (AgentNotFoundError, HarnessError) as exc:
        logger.warning("cannot implement plan %s after the restart: %s", click.subject, exc)
        await clicks.settle(click.key)
        return
    if task is None or started_since(task.dispatches, None, click.at):
        await clicks.settle(click.key)
        return
    _enqueue(conversations, click, record, task.slug)
