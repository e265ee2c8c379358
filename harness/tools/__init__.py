"""The harness tools agents call (``mcp__harness__draft_agent`` and the rest), and whether an
agent may make a built-in tool call.

``HarnessTools`` is the gateway: every harness tool call comes through it (access by role
category, strict input validation, the audit log, one error shape), and so does every approval
of a built-in tool call. Modules: ``gateway``, ``registry`` (how a tool is declared next to its
handler), ``handlers`` (the tools about agents), ``task_handlers`` (about tasks and humans),
``access`` (which tools a role category is offered), ``validation`` (tool inputs as pydantic
models), ``approvals`` (asking the task's humans, remembering and auditing what
``agents/approval_policy.py`` decides).
"""

from harness.tools.gateway import HarnessTools

__all__ = ["HarnessTools"]
