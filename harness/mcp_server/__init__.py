"""``harness mcp``: the harness's core served to outside MCP clients (Claude Code, Claude
Desktop, Cursor, scripts) over stdio or Streamable HTTP. Start tasks, follow and stop their
agents, read tasks' context and diffs, answer their approvals and questions, with the rights
the caller has in Slack. A front end like the CLI and the bot: it uses the orchestrator and
its services only, and reaches Slack (when a task is posted in a channel) through an announcer
plugged in by entry point, so harness/ stays free of Slack."""
