"""Which built-in tool calls an agent may make.

The role's ``deny:`` rules refuse, its ``allow:`` rules (and rules a human granted for the
task) let the call run, then its ``permissionMode`` (the harness applies it: the CLI never
decides alone), and anything else is asked of the task's humans: in its Slack thread
with buttons, or on the terminal. No human reachable, no answer in time, or a "deny" answer:
the call is refused and the agent is told why. Every decision goes to the task's audit log.
With the OS sandbox on, what no rule or mode decided runs when it stays inside the sandbox
(``permissions/sandboxed.py``); only what would leave it is asked.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from typing import Any

from harness.agents.orchestrator import Orchestrator
from harness.agents.pool import AgentInfo
from harness.agents.questions import VERDICT_LABELS, NoHumanError
from harness.permissions.answers import describe_tool_use, rules_for
from harness.permissions.rules import (
    PATH_FIELDS,
    PermissionRule,
    by_mode,
    decide,
    parse_rule,
)
from harness.permissions.sandboxed import within_sandbox
from harness.runtime.spec import Approval

logger = logging.getLogger(__name__)

# The buttons of an approval; ``answer_for`` reads a click or a reply as its verdict.
CHOICES = tuple(VERDICT_LABELS.values())
_INPUT_LIMIT = 2000


_SHOWN_INPUT = 1500


def full_input(tool: str, args: Mapping[str, Any]) -> str:
    """What exactly would run or change, for the person deciding: a Bash command whole,
    however long (what is not shown is not approved), an edit's old and new text, a new
    file's content (long ones cut, saying how much is left)."""
    if tool == "Bash":
        parts = [str(args.get("command", ""))]
    elif tool == "Edit":
        parts = [f"- {args.get('old_string', '')}", f"+ {args.get('new_string', '')}"]
    elif tool == "Write":
        parts = [str(args.get("content", ""))]
    else:
        return ""
    text = "\n".join(parts)
    if tool != "Bash" and len(text) > _SHOWN_INPUT:
        text = text[:_SHOWN_INPUT] + f"\n… ({len(text) - _SHOWN_INPUT} more characters)"
    return f"\n```\n{text}\n```"


def _rules(texts: tuple[str, ...]) -> list[PermissionRule]:
    rules = []
    for text in texts:
        try:
            rules.append(parse_rule(text))
        except ValueError as exc:  # a hand-edited task.json: skip the rule, keep the rest
            logger.warning("ignoring the task's allowed rule %r: %s", text, exc)
    return rules


async def _real_paths(
    tool: str, args: Mapping[str, Any], cwd: str
) -> tuple[Mapping[str, Any], str]:
    """The use with its file path, and the working folder, as the file system resolves them:
    rules and modes judge where a write really lands (a link out of the folder is outside)."""
    field = PATH_FIELDS.get(tool, "")
    path = args.get(field)

    def real() -> tuple[Mapping[str, Any], str]:
        root = os.path.realpath(cwd)
        if not isinstance(path, str) or not path:
            return args, root
        return {**args, field: os.path.realpath(os.path.join(cwd, os.path.expanduser(path)))}, root

    return await asyncio.to_thread(real)


def _remembered(tool: str, args: Mapping[str, Any], cwd: str) -> tuple[str, ...]:
    """The rules an "Allow for this task" of this use stores: its exact command (a prefix only
    for a program that only reads), its file; () when nothing is narrow enough."""
    try:
        return tuple(parse_rule(text).text for text in rules_for(tool, args, cwd=cwd))
    except ValueError as exc:
        logger.info("nothing to remember an approval of %s by: %s", tool, exc)
        return ()


def _what_for_task(remembered: tuple[str, ...]) -> str:
    """What the "Allow for this task" button stores, said beside it."""
    if not remembered:
        return "_Allow for this task_ allows it this once only: nothing narrower to remember."
    rules = ", ".join(f"`{rule}`" for rule in remembered)
    return f"_Allow for this task_ remembers {rules}: only that runs without asking again."


class Approvals:
    def __init__(self, orchestrator: Orchestrator) -> None:
        self._orchestrator = orchestrator

    async def approve(self, agent_id: str, tool: str, args: Mapping[str, Any]) -> Approval:
        orch = self._orchestrator
        agent = orch.agent(agent_id)
        if agent is None:
            return Approval(False, f"agent {agent_id} is not running")
        role = orch.role(agent.role)
        granted = _rules((await orch.task(agent.task_slug)).allowed)
        real, root = await _real_paths(tool, args, agent.cwd)
        ruled = decide(tool, real, allow=(*role.allow, *granted), deny=role.deny, cwd=root)
        if ruled.decision != "ask":
            allowed = ruled.decision == "allow"
            source = f"rule {ruled.rule}" if ruled.rule else "rule"
            message = "" if allowed else f"denied by the {role.name} role's {source}"
            return self._decided(agent, tool, args, allowed, source, message)
        moded = by_mode(role.permission_mode, tool, real, cwd=root)
        if moded == "ask" and orch.config.sandbox.enabled and role.writes:
            # The sandbox is the boundary (an agent that can write runs in one, or not at
            # all): what stays inside it runs; what would leave it is asked.
            moded = within_sandbox(tool, real, cwd=root)
            if moded == "allow":
                return self._decided(agent, tool, args, True, "sandbox", "")
        if moded != "ask":
            source = f"permissionMode {role.permission_mode}"
            message = "" if moded == "allow" else f"denied by the {role.name} role's {source}"
            return self._decided(agent, tool, args, moded == "allow", source, message)
        what = describe_tool_use(tool, args, cwd=agent.cwd)
        remembered = _remembered(tool, args, agent.cwd)
        question = (
            f"{role.name} `{agent_id}` asks to run {what}. Allow it?{full_input(tool, args)}\n"
            + _what_for_task(remembered)
        )
        try:
            _, answer = await orch.ask_human(
                agent_id, question, CHOICES, None, activity="waiting for approval", kind="approval"
            )
        except NoHumanError as exc:
            message = f"denied: no human could approve it ({exc.message})"
            return self._decided(agent, tool, args, False, "no human", message)
        if answer is None:
            message = "denied: nobody approved it in time"
            return self._decided(agent, tool, args, False, "timeout", message)
        # The core takes an approval's answer only with a verdict, from its requester or an
        # admin; an answer without one is no approval.
        verdict = answer.verdict or "deny"
        who = f"{answer.answered_by} ({VERDICT_LABELS[verdict]})"
        if verdict == "task":
            for rule in remembered:
                await self._orchestrator.allow_for_task(agent.task_slug, rule)
        if verdict == "deny":
            message = f"denied by {answer.answered_by}: {answer.text or 'denied'}"
            return self._decided(agent, tool, args, False, who, message)
        return self._decided(agent, tool, args, True, who, "")

    def _decided(
        self,
        agent: AgentInfo,
        tool: str,
        args: Mapping[str, Any],
        allowed: bool,
        decided_by: str,
        message: str,
    ) -> Approval:
        shown = {k: (v[:_INPUT_LIMIT] if isinstance(v, str) else v) for k, v in args.items()}
        self._orchestrator.audit(
            agent.task_slug,
            {
                "time": self._orchestrator.now(),
                "tool": "approval",
                "callerAgentId": agent.agent_id,
                "callerRole": agent.role,
                "task": agent.task_slug,
                "input": {"tool": tool, "input": shown},
                "outcome": "allowed" if allowed else "denied",
                "decidedBy": decided_by,
                "durationMs": 0,
            },
        )
        return Approval(allowed, message)
