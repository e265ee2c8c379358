"""The Slack front end: a slack_bolt ``AsyncApp`` over the harness's core.

It acks, dedupes and parses what Slack sends, opens the core (``harness.opening``), calls the
orchestrator and the services it wires (tasks, humans, pull requests, accounts, shared files),
and renders and posts what they report. Parsing and Block Kit rendering are pure
(``parsing``, ``blocks``, ``*_views``); what the bot still owes a thread lives in the task
store's ledger (``outbox``, ``dedupe``), so a restart loses nothing. ``testing`` holds the
Slack emulator the tests and demos use. The core never imports this package.
"""
