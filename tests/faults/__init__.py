"""The fault suite: restarts with real processes, SIGKILL, Slack failures, hostile requests,
damaged task folders."""
