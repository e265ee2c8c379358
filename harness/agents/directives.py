"""What a request asks of its agent besides the work: a plan first, a model. Pure.

A request (a Slack message, a follow-up, ``harness run``'s prompt) may start with
``plan first:`` and ``model:<name>``, in either order; they are taken off the text before it
is routed, so ``plan first: a dark mode`` is not taken for the ``^plan`` routing rule.
``for_request`` turns them into the role the agent runs as: the model checked against the
role's ``models:``, and for a plan, the role made read-only.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from harness.config.roles import Role
from harness.errors import HarnessError

# Model names as the CLI takes them: aliases (opus), catalog ids (claude-opus-5-5), a
# context suffix (sonnet[1m]).
MODEL_NAME = r"[A-Za-z0-9][A-Za-z0-9._\-\[\]]{0,63}"
_PLAN = re.compile(r"plan[ \t]+first[ \t]*:", re.IGNORECASE)
_MODEL = re.compile(rf"model[ \t]*:[ \t]*({MODEL_NAME})(?=[\s,;]|$)", re.IGNORECASE)
_GAP = " \t\r\n,;"

# What a planner may use: it reads, it changes nothing (no Write, Edit or Bash).
READING_TOOLS: tuple[str, ...] = ("Read", "Glob", "Grep")
# A planner's category: not a full-access one, so it is offered the harness's read-only
# tools (it cannot draft an agent that would write before the plan is approved).
PLAN_CATEGORY = "planner"
PLAN_INSTRUCTIONS = (
    "Plan first: this request asks for a plan before any change. Read what you need, change "
    "nothing, and make your result the plan: its summary says the approach, `changes` lists "
    "the steps in order (files and what changes in each), `issues` the risks and `questions` "
    "what you need decided. A person approves it, or asks for changes, before anyone "
    "implements it."
)
APPROVED = (
    "The plan above (the latest result of the planner) was approved by {who}: implement it "
    "now, following its steps."
)
CHANGES_ASKED = (
    "Plan first, again: {who} asked for changes to the plan above. Revise it, changing "
    "nothing in the files: {what}"
)


@dataclass(frozen=True)
class Directives:
    plan_first: bool = False
    model: str | None = None


def parse_directives(text: str) -> tuple[Directives, str]:
    """The directives at the start of ``text`` and the rest of it. ``model:`` and
    ``plan first:`` may come in either order, each once; the rest starts at the first word
    that is neither."""
    plan, model, at = False, None, _after_gap(text, 0)
    while True:
        if not plan and (found := _PLAN.match(text, at)):
            plan = True
        elif model is None and (found := _MODEL.match(text, at)):
            model = found.group(1)
        else:
            break
        at = _after_gap(text, found.end())
    if not plan and model is None:
        return Directives(), text
    return Directives(plan_first=plan, model=model), text[at:]


def _after_gap(text: str, at: int) -> int:
    rest = text[at:]
    return at + len(rest) - len(rest.lstrip(_GAP))


def allowed_models(role: Role) -> tuple[str, ...]:
    """The models a request may pick for ``role``: its default one, then its ``models:``."""
    return tuple(dict.fromkeys([*([role.model] if role.model else []), *role.models]))


def check_model(role: Role, model: str) -> str:
    """``model`` when the role allows it (compared without case); a HarnessError naming
    the ones it does otherwise."""
    for name in allowed_models(role):
        if name.lower() == model.strip().lower():
            return name
    allowed = allowed_models(role)
    if not allowed:
        raise HarnessError(
            f"the {role.name} role does not let a request pick its model (it runs the "
            "Claude CLI's default one)",
            fix=f"leave `model:` out, or ask an admin to list models in {role.source} "
            "(`models: [sonnet, opus]`)",
        )
    listed = ", ".join(f"`{name}`" for name in allowed)
    raise HarnessError(
        f"the {role.name} role does not allow the model `{model}`; it allows {listed}",
        fix=f"start the request with `model:{allowed[-1]}` (or one of the others), or leave "
        f"`model:` out for `{allowed[0]}`",
    )


def for_request(role: Role, *, model: str | None = None, plan: bool = False) -> Role:
    """The role an agent of this request runs as: with the model it asked for (checked),
    and for a plan, read-only (reading tools, plan permission mode, a planner's harness
    tools)."""
    if model is not None:
        role = dataclasses.replace(role, model=check_model(role, model))
    if plan:
        tools = tuple(t for t in READING_TOOLS if role.tools is None or t in role.tools)
        role = dataclasses.replace(
            role,
            tools=tools or READING_TOOLS,
            permission_mode="plan",
            category=PLAN_CATEGORY,
            allow=(),
        )
    return role


def plan_prompt(prompt: str) -> str:
    """A planner's prompt: the request, and what a plan first asks of it."""
    return f"{prompt}\n\n{PLAN_INSTRUCTIONS}"
