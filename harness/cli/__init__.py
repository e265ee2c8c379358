"""The terminal front end: ``harness init | run | tasks | show | rm | worker | ...``, a thin
layer over the orchestrator. Modules: ``main`` (parsing and dispatch, light enough that
``harness --help`` loads no agent), ``commands`` (the commands that open the harness),
``parser`` (every command's arguments and help), ``render`` (plain-text rendering, pure),
``terminal`` (questions on the terminal), ``task_commands``, ``scaffold`` (``harness init``),
``offline`` (model access and the scripted model of ``--scripted``), ``demo``
(``make demo-cli``). Importing the package imports none of them.
"""
