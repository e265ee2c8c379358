"""Pull requests in the thread, as Block Kit (pure): an *Open pull request* button under a
result with changes, the link once it is open, how its checks go, a *Fix checks* button when
they fail, and what to do when something could not be done (with a *Try again* button:
nothing done is lost)."""

from __future__ import annotations

from bot.blocks import Block, ButtonElement, SlackMessage, escape, mention, section_block
from harness.agents.pull_requests import PullRequestEvent
from harness.tasks.model import DispatchRecord, PullRequest, Task

OPEN_PR_ACTION = "harness_open_pull_request"
FIX_CHECKS_ACTION = "harness_fix_checks"


def _button(action_id: str, text: str, value: str, *, primary: bool = False) -> ButtonElement:
    button: ButtonElement = {
        "type": "button",
        "action_id": action_id,
        "text": {"type": "plain_text", "text": text},
        "value": value,
    }
    if primary:
        button["style"] = "primary"
    return button


def _actions(*buttons: ButtonElement) -> Block:
    return {"type": "actions", "block_id": "harness_pull_request", "elements": list(buttons)}


def offers_pull_request(record: DispatchRecord, task: Task, has_forge: bool) -> bool:
    """A completed agent's changes on a branch of a repository with a forge, when the task
    has no pull request yet (once it has one, later work is pushed there by itself). A task
    with no change since its base (its stat all zeros: a review's) offers none."""
    return (
        has_forge
        and record.status == "completed"
        and bool(record.branch and record.diff_stat and record.diff_file)
        and task.pull_request is None
    )


def with_pull_request_button(messages: list[SlackMessage], task_slug: str) -> list[SlackMessage]:
    """``messages`` with an *Open pull request* button under the last one."""
    last = messages[-1]
    button = _actions(_button(OPEN_PR_ACTION, "Open pull request", task_slug, primary=True))
    return [*messages[:-1], {"text": last["text"], "blocks": [*last["blocks"], button]}]


def _link(pull: PullRequest) -> str:
    return f"<{pull.url}|#{pull.number}>"


def pull_request_message(event: PullRequestEvent) -> SlackMessage | None:
    """What the thread is told of a pull request event (None: nothing to say)."""
    pull, slug = event.pull_request, event.task.slug
    if event.kind == "failed":
        error = event.error
        if error is None:
            return None
        text = f"⚠️ {error.message}\n*What to do:* {error.fix}"
        retry = _button(OPEN_PR_ACTION, "Try again", slug)
        return {"text": text, "blocks": [section_block(escape(text)), _actions(retry)]}
    if pull is None:
        return None
    if event.kind == "opened":
        asker = f" for {mention(pull.requested_by)}" if pull.requested_by else ""
        text = (
            f"🔀 Pull request {_link(pull)} is open{asker}, as `{escape(pull.opened_by)}`: "
            f"`{escape(pull.branch)}` into `{escape(pull.base)}`."
        )
        return {"text": text, "blocks": [section_block(text)]}
    if event.kind == "updated":
        head = (pull.head_commit or "")[:12]
        text = f"⬆️ Pushed `{escape(head)}` to pull request {_link(pull)}."
        return {"text": text, "blocks": [section_block(text)]}
    if event.kind == "fixing":
        text = (
            f"🔧 Drafted a developer (agent `{escape(event.agent_id or '?')}`) to fix the "
            f"failed checks of {_link(pull)}; its commits go to the pull request."
        )
        return {"text": text, "blocks": [section_block(text)]}
    return _checks_message(pull, slug)


def _checks_message(pull: PullRequest, slug: str) -> SlackMessage | None:
    where = f" (<{pull.checks_url}|details>)" if pull.checks_url else ""
    if pull.checks == "pending":
        text = f"⏳ Checks are running on {_link(pull)}{where}."
    elif pull.checks == "passed":
        text = f"✅ Checks passed on {_link(pull)}{where}."
    elif pull.checks == "failed":
        names = ", ".join(f"`{escape(name)}`" for name in pull.failing) or "some checks"
        text = f"❌ Checks failed on {_link(pull)}: {names}{where}."
        fix = _button(FIX_CHECKS_ACTION, "Fix checks", slug, primary=True)
        return {"text": text, "blocks": [section_block(text), _actions(fix)]}
    else:
        return None
    return {"text": text, "blocks": [section_block(text)]}


def result_buttons_for(
    messages: list[SlackMessage], record: DispatchRecord, task: Task, has_forge: bool
) -> list[SlackMessage]:
    """The result's messages, with the pull request button where it is offered."""
    if offers_pull_request(record, task, has_forge):
        return with_pull_request_button(messages, task.slug)
    return messages
