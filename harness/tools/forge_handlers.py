"""The harness tool about pull requests: open_pull_request (full-access roles only).

Pushing leaves the sandbox, so, like any action that leaves it, the call is asked of the
task's humans first (in its thread, with buttons): only an allow from the task's requester or
an admin (the core refuses anyone else's answer to an approval) lets the harness push
and open the pull request, in that person's name. The token never passes through here.
"""

from __future__ import annotations

from typing import Any

from harness.agents.questions import VERDICT_LABELS, NoHumanError
from harness.agents.services import Services
from harness.errors import ForgeError, ForgeFailure, NotAllowedError, ToolError
from harness.tools.registry import Caller, TaskSlug, check_task, require_agent, tool
from harness.tools.validation import ToolInput

# "Allow for this task" would remember nothing here (no rule names a harness tool): the
# buttons are allow once and deny.
CHOICES = (VERDICT_LABELS["once"], VERDICT_LABELS["deny"])

# How each way a push or the forge failed reaches the agent: what it could do about it.
_CODES: dict[ForgeFailure, str] = {
    "no-forge": "INVALID_AGENT_STATE",
    "no-branch": "INVALID_AGENT_STATE",
    "rejected": "INVALID_AGENT_STATE",
    "not-found": "RESOURCE_NOT_FOUND",
    "credentials": "PERMISSION_DENIED",
    "forbidden": "PERMISSION_DENIED",
    "rate-limited": "UNAVAILABLE",
    "unavailable": "UNAVAILABLE",
}
_DENIED_SUGGESTION = (
    "do not push another way; finish with your result and say the pull request is still to "
    "open (a person can open it from the thread)"
)


class OpenPullRequestInput(ToolInput):
    taskSlug: TaskSlug | None = None  # noqa: N815 (the field name the model sees)


@tool(
    "open_pull_request",
    """Push the task's branch (harness/<slug>, its committed work) and open its pull request
    on GitHub, or update the open one; the title and body come from the task's results.
    Without taskSlug: your own task. The task's requester is asked to approve it in the
    thread first, and it is opened in their name. Returns {number, url, branch, openedBy}.
    Call it when the humans asked for a pull request and the work is committed.""",
    OpenPullRequestInput,
)
async def open_pull_request(
    svc: Services, caller: Caller | None, args: OpenPullRequestInput
) -> dict[str, Any]:
    caller = require_agent(caller, "open_pull_request")
    slug = args.taskSlug or caller.task_slug
    check_task(caller, slug)
    try:  # before anyone is asked: a task with no forge has nothing to open
        forge = svc.pull_requests.forge_or_error(await svc.tasks.task(slug)).github
    except ForgeError as exc:
        raise ToolError(_CODES[exc.failure], exc.message, exc.fix) from exc
    assert forge is not None
    full_name = forge.full_name
    question = (
        f"{caller.role} `{caller.agent_id}` asks to push branch `harness/{slug}` to "
        f"{full_name} and open (or update) its pull request. Allow it?"
    )
    try:
        _, answer = await svc.humans.ask_human(
            caller.agent_id, question, CHOICES, None,
            activity="waiting for approval", kind="approval",
        )  # fmt: skip
    except NoHumanError as exc:
        raise ToolError(
            "PERMISSION_DENIED",
            f"open_pull_request denied: no human could approve it ({exc.message})",
            _DENIED_SUGGESTION,
        ) from exc
    if answer is None:
        raise ToolError(
            "PERMISSION_DENIED",
            "open_pull_request denied: nobody approved it in time",
            _DENIED_SUGGESTION,
        )
    if answer.verdict not in ("once", "task"):  # the core takes approvals with a verdict only
        reason = f": {answer.text}" if answer.text else ""
        raise ToolError(
            "PERMISSION_DENIED",
            f"open_pull_request denied by {answer.answered_by}{reason}",
            _DENIED_SUGGESTION,
        )
    try:
        pull = await svc.pull_requests.open_pull_request(slug, by=answer.answered_by)
    except ForgeError as exc:
        raise ToolError(_CODES[exc.failure], exc.message, exc.fix) from exc
    except NotAllowedError as exc:  # approved in another task's thread, by whom may not here
        raise ToolError("PERMISSION_DENIED", exc.message, _DENIED_SUGGESTION) from exc
    return {
        "number": pull.number,
        "url": pull.url,
        "branch": pull.branch,
        "openedBy": pull.opened_by,
    }
