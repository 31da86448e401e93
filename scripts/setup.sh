#!/usr/bin/env bash
# Installs what the demo and the tests need on a fresh Debian machine: the system
# packages (as root, only those missing) and the npm dependencies (npm ci, only when
# package-lock.json changed since the last install).
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(iproute2 iputils-ping iptables containernetworking-plugins podman runc containerd busybox-static)

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
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

stamp=node_modules/.cni-driver-lock
if [ ! -f "$stamp" ] || ! cmp -s package-lock.json "$stamp"; then
  echo "setup: npm ci" >&2
  npm ci --no-audit --no-fund --loglevel=error >&2
  cp package-lock.json "$stamp"
fi

# The native addons: in-process netlink (pod plumbing without a spawn per pod),
# posix_spawn for plugin execs (no fork of the driver per exec) and flock (the
# in-process host-local's lock). Without them the driver falls back to iproute2,
# Node's spawn and the host-local binary and says so; CI must have them.
addons="build/Release/cni_driver_netlink.node build/Release/cni_driver_spawn.node build/Release/cni_driver_flock.node"
stale=""
for addon in $addons; do
  if [ ! -f "$addon" ] || [ -n "$(find native binding.gyp -newer "$addon" 2>/dev/null | head -1)" ]; then
    stale=1
  fi
done
if [ -n "$stale" ]; then
  echo "setup: building the native addons" >&2
  if ! bash scripts/build-native.sh >&2; then
    echo "setup: the native addons did not build; the driver will use iproute2 and Node's spawn" >&2
    [ "${CI:-}" != "true" ] || exit 1
  fi
fi
