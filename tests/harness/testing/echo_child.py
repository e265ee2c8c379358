"""Run as ``python -m tests.harness.testing.echo_child CODE [ARGS...]`` by test_spawn.py: says
on stdout what it was started with (folder, environment, arguments, standard input) and exits
with CODE; ``raise`` raises instead, ``wait`` says so and waits for a signal."""

from __future__ import annotations

import json
import os
import sys


def main(argv: list[str]) -> int:
    print("to stderr", file=sys.stderr)
    if argv[0] == "raise":
        raise RuntimeError("raised in the child")
    if argv[0] == "wait":
        print("waiting", flush=True)
        sys.stdin.read()
        return 0
    said = {
        "cwd": os.getcwd(),
        "env": os.environ.get("SPAWN_TEST"),
        "argv": argv[1:],
        "stdin": sys.stdin.read(),
        "pid": os.getpid(),
        "parent": os.getppid(),
    }
    print(json.dumps(said))
    return int(argv[0])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
