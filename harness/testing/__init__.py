"""Test fixtures that the demos and benchmarks also use: the scripted Messages API server, a
held runtime, a NATS server, workers, process helpers and dispatch records. Not product code;
they import only what the package depends on (the conformance suites, which need pytest, live
in tests/)."""
