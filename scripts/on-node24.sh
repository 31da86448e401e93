#!/usr/bin/env bash
# Runs a command on the pinned Node 24 (scripts/use-node24.sh): the npm scripts of
# the benches and the unit suite go through it, so they measure and test the Node
# the image ships whatever Node ran `npm run`.
#
# Usage: scripts/on-node24.sh COMMAND [ARGS...]
set -euo pipefail
# shellcheck source=scripts/use-node24.sh
source "$(dirname "$0")/use-node24.sh"
exec "$@"
