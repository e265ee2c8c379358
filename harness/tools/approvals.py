"""Approvals of the built-in tool calls an agent makes: the I/O around the policy.

What decides is ``agents/approval_policy.py`` (pure): the role's rules, the rules granted for
the task, its ``permissionMode``, the OS sandbox, then the task's humans. Here the task's
granted rules are read, paths resolved as the file system does, the humans asked (in the
task's Slack thread with buttons, or on the terminal), an "Allow for this task" remembered in
task.json, and every decision written to the task's audit log.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from typing import Any

from harness.agents.approval_policy import Ruling, no_human, rule_answer, rule_approval
from harness.agents.pool import AgentInfo
from harness.agents.questions import VERDICT_LABELS, NoHumanError
from harness.agents.services import Services
from harness.permissions.answers import describe_tool_use, rules_for
from harness.permissions.rules import PATH_FIELDS, PermissionRule, parse_rule
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
    def __init__(self, services: Services) -> None:
        self._services = services

    async def approve(self, agent_id: str, tool: str, args: Mapping[str, Any]) -> Approval:
        svc = self._services
        agent = svc.lifecycle.agent(agent_id)
        if agent is None:
            return Approval(False, f"agent {agent_id} is not running")
        role = svc.lifecycle.role(agent.role)
        granted = _rules((await svc.tasks.task(agent.task_slug)).allowed)
        real, root = await _real_paths(tool, args, agent.cwd)
        sandbox = svc.config.sandbox.enabled
        ruling = rule_approval(tool, real, cwd=root, role=role, granted=granted, sandbox=sandbox)
        if ruling.decision != "ask":
            return self._decided(agent, tool, args, ruling)
        what = describe_tool_use(tool, args, cwd=agent.cwd)
        remembered = _remembered(tool, args, agent.cwd)
        question = (
            f"{role.name} `{agent_id}` asks to run {what}. Allow it?{full_input(tool, args)}\n"
            + _what_for_task(remembered)
        )
        try:
            _, answer = await svc.humans.ask_human(
                agent_id, question, CHOICES, None, activity="waiting for approval", kind="approval"
            )
        except NoHumanError as exc:
            return self._decided(agent, tool, args, no_human(exc.message))
        ruling = rule_answer(answer)
        if ruling.remember:
            for rule in remembered:
                await svc.tasks.allow_for_task(agent.task_slug, rule)
        return self._decided(agent, tool, args, ruling)

    def _decided(
        self,
        agent: AgentInfo,
        tool: str,
        args: Mapping[str, Any],
        ruling: Ruling,
    ) -> Approval:
        shown = {k: (v[:_INPUT_LIMIT] if isinstance(v, str) else v) for k, v in args.items()}
        self._services.tasks.audit(
            agent.task_slug,
            {
                "time": self._services.lifecycle.now(),
                "tool": "approval",
                "callerAgentId": agent.agent_id,
                "callerRole": agent.role,
                "task": agent.task_slug,
                "input": {"tool": tool, "input": shown},
                "outcome": "allowed" if ruling.allowed else "denied",
                "decidedBy": ruling.decided_by,
                "durationMs": 0,
            },
        )
        return Approval(ruling.allowed, ruling.message)
