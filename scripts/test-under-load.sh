#!/usr/bin/env bash
# The tests on a loaded machine: CPU hogs (stress-ng, from Debian) run beside
# the suite for as long as it runs, and it must pass all the same. Tests assert
# order and outcome, never how long something took (that is bench/'s job), so
# load may only make them slower.
#
#   bash scripts/test-under-load.sh                  the whole suite (scripts/test.sh)
#   bash scripts/test-under-load.sh FILE.test.ts...  only these files (mocha, on a
#                                                    machine scripts/setup.sh has set up)
#
# CNI_DRIVER_LOAD_CPUS: how many hogs (default: two per core, e.g.
# `stress-ng --cpu 4` on two cores). CNI_DRIVER_TEST_PATIENCE: how much longer
# every wait of the tests may last (default here 4: with two hogs per core a
# test gets about a third of a core; see test/support/patience.ts).
set -uo pipefail
cd "$(dirname "$0")/.."

if ! command -v stress-ng >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "test-under-load: stress-ng is missing (apt-get install stress-ng, as root)" >&2
    exit 1
  fi
  echo "test-under-load: installing stress-ng" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends stress-ng >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends stress-ng >/dev/null; } ||
    { echo "test-under-load: cannot install stress-ng" >&2; exit 1; }
fi

hogs=${CNI_DRIVER_LOAD_CPUS:-$(($(nproc) * 2))}
export CNI_DRIVER_TEST_PATIENCE=${CNI_DRIVER_TEST_PATIENCE:-4}
stress-ng --cpu "$hogs" --timeout 0 --quiet &
hog_pid=$!
# Only the hogs this script started: stress-ng stops its workers on SIGTERM.
stop_hogs() {
  kill -TERM "$hog_pid" 2>/dev/null
  wait "$hog_pid" 2>/dev/null
}
trap stop_hogs EXIT
echo "test-under-load: $hogs CPU hogs beside the tests (stress-ng pid $hog_pid), waits stretched ${CNI_DRIVER_TEST_PATIENCE}x" >&2

if [ $# -gt 0 ]; then
  npx mocha --reporter spec "$@"
  rc=$?
else
  bash scripts/test.sh
  rc=$?
fi
echo "test-under-load: load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
exit "$rc"
