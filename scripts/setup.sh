#!/usr/bin/env bash
# Installs what the demo and the tests need on a fresh Debian machine: the pinned
# Node 24, the system packages (as root, only those missing), the npm dependencies
# (npm ci, only when package-lock.json changed since the last install), the native
# addons and dist/ (the `cni-driver` command), each only when its sources changed.
set -euo pipefail
cd "$(dirname "$0")/.."

# Everything below runs on the pinned Node 24 (scripts/use-node24.sh), whatever Node
# ran `npm run`: Debian 12's own nodejs 18 and npm do for that.
# shellcheck source=scripts/use-node24.sh
source scripts/use-node24.sh || exit 1

APT_PACKAGES=(iproute2 iputils-ping iptables nftables conntrack containernetworking-plugins podman runc containerd busybox-static
  # sysctl, pgrep and ps, which minimal roots lack
  procps
  # the image's local Debian base (scripts/debian-rootfs.sh)
  debootstrap
  # the native addons (node-gyp: python3, make, a C and C++ compiler) and the native shim
  build-essential python3 pkg-config
  libnghttp2-dev libjansson-dev libprotobuf-c-dev protobuf-c-compiler)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# kubectl (for `kubectl kustomize` in the manifest tests): Debian's package only when
# no kubectl is on the machine, since another package may already own the command.
command -v kubectl >/dev/null 2>&1 || missing+=(kubernetes-client)
if ((${#missing[@]})); then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing Debian packages: ${missing[*]} (run as root to install them)" >&2
  else
    echo "setup: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    # Another apt on the machine holds its lock for a while: wait rather than fail.
    apt_wait=(-o DPkg::Lock::Timeout=600)
    apt-get "${apt_wait[@]}" update -qq >/dev/null
    apt-get "${apt_wait[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

stamp=node_modules/.cni-driver-lock
if [ ! -f "$stamp" ] || ! cmp -s package-lock.json "$stamp"; then
  # npm's own settings apply (registry, proxy, cafile; NODE_EXTRA_CA_CERTS). It runs no
  # node-gyp of its own ("gypfile": false): the addons are built below, with the local headers.
  echo "setup: npm ci" >&2
  npm ci --no-audit --no-fund --loglevel=error >&2
  cp package-lock.json "$stamp"
fi

# The native addons: in-process netlink (pod plumbing without a spawn per pod),
# posix_spawn for plugin execs (no fork of the driver per exec) and flock (the
# in-process host-local's lock), memory, nftables (libnftables in-process) and
# conntrack (ctnetlink in-process). Without them the driver falls back to
# iproute2, Node's spawn, the host-local binary, nft and conntrack execs and says
# so; CI must have them.
addons="build/Release/cni_driver_netlink.node build/Release/cni_driver_spawn.node build/Release/cni_driver_flock.node build/Release/cni_driver_memory.node build/Release/cni_driver_nftables.node build/Release/cni_driver_conntrack.node"
# Built for one Node: a different one (a new pin) rebuilds them against its headers.
built_for=build/.cni-driver-built-for
stale=""
[ "$(cat "$built_for" 2>/dev/null)" = "$(node --version)" ] || stale=1
for addon in $addons; do
  if [ ! -f "$addon" ] || [ -n "$(find native binding.gyp -newer "$addon" 2>/dev/null | head -1)" ]; then
    stale=1
  fi
done
if [ -n "$stale" ]; then
  echo "setup: building the native addons" >&2
  # node-gyp's progress only when it fails: then its own words say why.
  if ! build_log=$(bash scripts/build-native.sh 2>&1); then
    echo "$build_log" >&2
    echo "setup: the native addons did not build (node-gyp's output above); the driver will use iproute2, Node's spawn and the host-local binary" >&2
    [ "${CI:-}" != "true" ] || exit 1
  else
    node --version >"$built_for"
  fi
fi

# dist/: what the package's `cni-driver` bin runs (`npx cni-driver …`). A failed build
# is not fatal here: the demo and the tests run the sources, and CI's lint names the error.
if [ ! -f dist/src/driver/cli.js ] || [ -n "$(find src tsconfig.json package.json -newer dist/src/driver/cli.js 2>/dev/null | head -1)" ]; then
  echo "setup: npm run build (dist/, for npx cni-driver)" >&2
  npm run --silent build >&2 || echo "setup: npm run build failed; npx cni-driver may run an older dist/" >&2
fi
