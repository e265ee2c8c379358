"""The terminal front end: ``harness init | run | tasks | show | rm | worker | ...``, a thin
layer over the orchestrator. Modules: ``main`` (dispatch), ``parser`` (every command's
arguments and help), ``render`` (plain-text rendering, pure), ``terminal`` (questions on the
terminal), ``task_commands``, ``scaffold`` (``harness init``), ``offline`` (model access and
the scripted model of ``--scripted``), ``demo`` (``make demo-cli``).
"""

from harness.cli.main import main

__all__ = ["main"]
