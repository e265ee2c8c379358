"""Test fixtures of the Slack front end: the Slack emulator on loopback. Not product code."""
