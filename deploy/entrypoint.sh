#!/bin/sh
# The container's entrypoint: runs its command (`harness bot`, `harness worker ...`) in place
# of itself, so that the harness gets the container's signals (SIGTERM stops its agents).
#
# A bot's first start, with no config.yaml at $HARNESS_CONFIG yet, writes the shipped one
# there (in the data volume, where it is kept and edited) with `runtime: nats` at
# $HARNESS_NATS_URL when that is set: the agents then run on the workers. A config that is
# there is never touched.
set -eu

if [ "${1:-}" = harness ] && [ "${2:-}" = bot ] && [ -n "${HARNESS_CONFIG:-}" ] \
    && [ ! -e "$HARNESS_CONFIG" ]; then
    case "$HARNESS_CONFIG" in
        */config.yaml) ;;
        *) echo "entrypoint: HARNESS_CONFIG must name a config.yaml file" >&2; exit 2 ;;
    esac
    folder=$(dirname "$HARNESS_CONFIG")
    harness init "$folder" >&2
    if [ -n "${HARNESS_NATS_URL:-}" ]; then
        printf '\n# Written at the first start: the agents run on `harness worker`s.\nruntime:\n  kind: nats\n  url: %s\n' \
            "$HARNESS_NATS_URL" >>"$HARNESS_CONFIG"
    fi
    echo "entrypoint: wrote $HARNESS_CONFIG and its roles/ (the volume keeps them: edit them there)" >&2
fi
exec "$@"
