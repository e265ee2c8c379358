"""The agents' OS sandbox: every agent that can write or run commands runs in bubblewrap.

Inside, the agent sees the system read-only, its own working folder writable, a private
``/tmp`` and home, its own processes only and no network: its one way out is a Unix socket on
which the harness serves the model API, adding the key the agent never holds, and a proxy to
the hosts ``sandbox.network.allow`` names. On a machine where bubblewrap cannot start, such
agents do not start (``SandboxUnavailableError`` says the fix), unless config says
``sandbox: off``.

Modules: ``layout`` (what the sandbox shows, as bubblewrap arguments: pure), ``environment``
(the allow-list of environment variables agents get, in it or not: pure), ``runner``
(checking bubblewrap, one run's proxy and launcher), ``unavailable`` (why the sandbox cannot
start on a host and the fix there: pure), ``proxy`` (the egress proxy: one
connection's request, routed), ``model_calls`` (which model calls are forwarded, their usage
and price: pure), ``model_route`` (a model call forwarded with the key and counted),
``limits`` (connections and rate per sandbox), ``hosts`` (host names and the allow list:
pure), ``wire`` (HTTP heads), ``bridge`` (the first program inside: loopback TCP to the
socket, then the CLI). Import from the modules: the package itself stays light for front ends
that never run an agent.
"""
