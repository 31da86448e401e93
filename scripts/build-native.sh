#!/usr/bin/env bash
# Builds the native addons of binding.gyp with the node-gyp bundled in npm (no
# dependency to add): build/Release/cni_driver_netlink.node (native/netlink, pod
# plumbing over rtnetlink), build/Release/cni_driver_spawn.node (native/spawn,
# plugin execs through posix_spawn), build/Release/cni_driver_flock.node
# (native/flock, the in-process host-local's lock and lease-directory watch),
# build/Release/cni_driver_memory.node (native/memory, malloc_trim when idle) and
# build/Release/cni_driver_nftables.node (native/nftables, nftables transactions
# through libnftables in-process) and build/Release/cni_driver_conntrack.node
# (native/conntrack, the connection tracking table through ctnetlink). Without
# them the driver falls back to iproute2 execs, Node's spawn, the host-local
# binary, nft and conntrack execs (it logs which), and keeps what glibc keeps.
#
# Headers: the ones installed beside the node that runs this (include/node of a
# nodejs.org layout such as scripts/node24.sh's, /usr/include/node for Debian's
# nodejs), else npm's `nodedir`, so nothing is downloaded and the addons match the
# Node that loads them.
#
# Usage: scripts/build-native.sh [extra node-gyp arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

find_node_gyp() {
  # npm exports it to the scripts it runs.
  if [ -n "${npm_config_node_gyp:-}" ] && [ -f "$npm_config_node_gyp" ]; then
    echo "$npm_config_node_gyp"
    return
  fi
  local npm_bin npm_dir candidate
  if npm_bin=$(command -v npm); then
    npm_dir=$(dirname "$(readlink -f "$npm_bin")")/..
    for candidate in \
      "$npm_dir/node_modules/node-gyp/bin/node-gyp.js" \
      "$(dirname "$npm_bin")/../lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js" \
      "$(npm root -g 2>/dev/null)/npm/node_modules/node-gyp/bin/node-gyp.js"; do
      if [ -f "$candidate" ]; then
        readlink -f "$candidate"
        return
      fi
    done
  fi
  if [ -f node_modules/node-gyp/bin/node-gyp.js ]; then
    echo node_modules/node-gyp/bin/node-gyp.js
    return
  fi
  echo "build-native: node-gyp not found (it ships with npm)" >&2
  exit 1
}

find_nodedir() {
  local dir
  dir=$(dirname "$(dirname "$(readlink -f "$(command -v node)")")")
  if [ -f "$dir/include/node/node_api.h" ]; then
    echo "$dir"
    return
  fi
  dir=$(npm config get nodedir 2>/dev/null || true)
  if [ -n "$dir" ] && [ "$dir" != "undefined" ] && [ "$dir" != "null" ]; then echo "$dir"; fi
}

node_gyp=$(find_node_gyp)
nodedir=$(find_nodedir)
echo "build-native: $node_gyp rebuild${nodedir:+ --nodedir=$nodedir}" >&2
exec node "$node_gyp" rebuild ${nodedir:+"--nodedir=$nodedir"} "$@"
