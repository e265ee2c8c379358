"""Test fixtures that the demo also uses: the scripted Messages API server, a held runtime,
process helpers and the conformance suites every backend must pass. Not product code."""
