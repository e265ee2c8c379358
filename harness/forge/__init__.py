"""Forges: where a task's branch becomes a pull request, and its checks are read.

``push`` pushes a task's branch with the harness's credentials; ``github`` is GitHub's REST
API for one repository (pull requests, check runs, job logs, App installation tokens);
``text`` makes a pull request's title and body from its task; ``checks`` says how checks
stand and what a developer fixing them is asked; ``device_flow`` links a person's GitHub
account (OAuth device flow) and ``accounts`` keeps the linked accounts, tokens encrypted.
The core's pull request and account services (``harness/agents/pull_requests.py``,
``account_links.py``) tie them together. GitHub first; another forge is another module beside
``github``.
"""
