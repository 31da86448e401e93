#!/usr/bin/env bash
# The demo: installs what it needs, then runs the driver on the embedded default
# config (configmap/cni-driver-config.yaml) under a temporary root, sets up two
# pods through the socket, pings between them, tears everything down.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "demo: needs root (it creates network namespaces, veths and a bridge); run it as root" >&2
  exit 1
fi
# shellcheck source=scripts/use-node24.sh
source scripts/use-node24.sh
bash scripts/setup.sh
exec node --import tsx scripts/demo.ts "$@"
