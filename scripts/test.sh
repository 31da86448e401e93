#!/usr/bin/env bash
# The test command: installs what the tests need, then runs every suite (unit,
# integration, e2e) and ends with "N passed, N failed" alone on a line.
# Suites that need root say so and fail when CI=true and root is missing.
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/use-node24.sh
source scripts/use-node24.sh || exit 1
bash scripts/setup.sh || exit 1

out=$(mktemp)
trap 'rm -f "$out"' EXIT
# The reporter's summary is parsed, so keep it plain and in one run.
NODE_OPTIONS="${NODE_OPTIONS:-}" npx mocha --reporter spec \
  'test/unit/**/*.test.ts' 'test/integration/**/*.test.ts' 'test/e2e/**/*.test.ts' 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}

passed=$(grep -Eo '^ *[0-9]+ passing' "$out" | grep -Eo '[0-9]+' | tail -1)
failed=$(grep -Eo '^ *[0-9]+ failing' "$out" | grep -Eo '[0-9]+' | tail -1)
pending=$(grep -Eo '^ *[0-9]+ pending' "$out" | grep -Eo '[0-9]+' | tail -1)
passed=${passed:-0}
failed=${failed:-0}
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
if [ -n "$pending" ]; then
  echo "${passed} passed, ${failed} failed, ${pending} skipped"
else
  echo "${passed} passed, ${failed} failed"
fi
[ "$rc" -eq 0 ] && [ "$failed" -eq 0 ]
