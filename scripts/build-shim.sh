#!/usr/bin/env bash
# Builds dist/bin/cni-driver-shim: the shim as one executable that needs no Node.js on
# the host (Node's single executable applications).
#
#  1. Node: the official linux-x64 build of a Node 24 LTS, the one the image ships
#     (scripts/node24.sh fetches it, pinned and checked, and prints its path).
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

SEA_FUSE=NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2

out=${1:-dist/bin/cni-driver-shim}
work=node_modules/.cache/cni-driver-shim
node_bin=$(bash scripts/node24.sh)
mkdir -p "$work" "$(dirname "$out")"

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
