"""Which built-in tool call of an agent runs, is refused, or is asked of a human. Pure.

The order is the rule: the role's ``deny:`` rules refuse (deny wins over every allow); its
``allow:`` rules and the rules a human granted for the task ("Allow for this task") let the
call run; then the role's ``permissionMode`` (the harness applies it: the CLI never decides
alone); then, for a role that can write while the OS sandbox is on, what stays inside the
sandbox runs (the sandbox is the boundary: such an agent runs in one, or not at all); what is
left is asked of the task's humans. A human's answer decides: no answer in time, no human
to ask, or a "Deny" refuses; "Allow for this task" allows and is remembered as rules
(``permissions/answers.rules_for``) for the next time. Who may answer is the authority's to
say (``authority.py``); asking, remembering and auditing are ``tools/approvals.py``'s I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.agents.questions import VERDICT_LABELS, Answer
from harness.config.roles import Role
from harness.permissions.rules import Decision, PermissionRule, by_mode, decide
from harness.permissions.sandboxed import within_sandbox


@dataclass(frozen=True)
class Ruling:
    decision: Decision  # "allow", "deny", or "ask" a human
    # Who or what decided, as the audit log says it: "rule Edit(**)", "permissionMode
    # dontAsk", "sandbox", "U42 (Deny)", "no human", "timeout"; "" while it is asked.
    decided_by: str = ""
    # What the agent is told of a refusal ("" when allowed); why it is asked, when asked.
    message: str = ""
    # An "Allow for this task": the rules this use is remembered by are granted to the task.
    remember: bool = False

    @property
    def allowed(self) -> bool:
        return self.decision == "allow"


def rule_approval(
    tool: str,
    args: Mapping[str, object],
    *,
    cwd: Path | str,
    role: Role,
    granted: Sequence[PermissionRule] = (),
    sandbox: bool = False,
) -> Ruling:
    """What decides ``tool`` with ``args`` before any human is asked. ``args`` and ``cwd``
    are as the file system resolves them (a link out of the folder is outside it);
    ``granted`` are the task's remembered rules; ``sandbox``: the OS sandbox is on."""
    ruled = decide(tool, args, allow=(*role.allow, *granted), deny=role.deny, cwd=cwd)
    if ruled.decision != "ask":
        source = f"rule {ruled.rule}" if ruled.rule else "rule"
        return _by(ruled.decision, source, role)
    moded = by_mode(role.permission_mode, tool, args, cwd=cwd)
    # An agent that can write runs in the sandbox, or not at all: what stays inside it runs.
    sandboxed = moded == "ask" and sandbox and role.writes
    if sandboxed and within_sandbox(tool, args, cwd=cwd) == "allow":
        return Ruling("allow", "sandbox")
    if moded != "ask":
        return _by(moded, f"permissionMode {role.permission_mode}", role)
    return Ruling("ask", message=ruled.reason)


def _by(decision: Decision, source: str, role: Role) -> Ruling:
    if decision == "allow":
        return Ruling("allow", source)
    return Ruling("deny", source, f"denied by the {role.name} role's {source}")


def rule_answer(answer: Answer | None) -> Ruling:
    """What a human's answer to an approval decides; None: nobody answered in time. An
    answer without a verdict is no approval: the core takes one only from its requester or
    an admin, with a verdict."""
    if answer is None:
        return Ruling("deny", "timeout", "denied: nobody approved it in time")
    verdict = answer.verdict or "deny"
    who = f"{answer.answered_by} ({VERDICT_LABELS[verdict]})"
    if verdict == "deny":
        return Ruling("deny", who, f"denied by {answer.answered_by}: {answer.text or 'denied'}")
    return Ruling("allow", who, remember=verdict == "task")


def no_human(why: str) -> Ruling:
    """No front end reaches a human of the task: nobody can approve, so it is refused."""
    return Ruling("deny", "no human", f"denied: no human could approve it ({why})")
