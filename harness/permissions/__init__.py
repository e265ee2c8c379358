"""Permission rules in Claude Code's syntax (``Bash(git status:*)``, ``Edit(src/**)``), and
the shell reading behind Bash rules. Pure: no I/O, no harness state.

Modules: ``rules`` (parsing a rule, deciding a tool use against a role's allow and deny
rules), ``answers`` (a tool use as a question shows it, the rule a human's answer remembers),
``shell`` (a command line read without running it: its simple commands and what no prefix
rule can vouch for).
"""

from harness.permissions.answers import describe_tool_use, rule_for, rules_for
from harness.permissions.rules import (
    InvalidRuleError,
    PermissionRule,
    RuleDecision,
    decide,
    parse_rule,
)
from harness.permissions.shell import CommandLine, split_command

__all__ = [
    "CommandLine",
    "InvalidRuleError",
    "PermissionRule",
    "RuleDecision",
    "decide",
    "describe_tool_use",
    "parse_rule",
    "rule_for",
    "rules_for",
    "split_command",
]
