#!/usr/bin/env bash
# The README's first command on a fresh machine: a bare Debian 12 root
# (`debootstrap --variant=minbase bookworm`) with nothing but Debian's own `nodejs`
# and `npm` installed (Node 18: setup fetches the pinned Node 24 and runs everything
# on it) and a clone of this repository at HEAD. There,
# as a new user would (a clean environment, a login shell as root, a mount
# namespace whose root is the fresh root), it runs `npm run demo`, then
# `npx cni-driver --help` and test/integration/native-parts.test.ts (the native
# addons and the shim, built in that root).
#
# The root is cached as a tarball under $FRESH_ROOT_CACHE (default
# /var/cache/cni-driver-fresh-root; rebuilt after 30 days), with the .debs apt
# fetched inside it. The mirror is the one this machine's apt uses, or
# $FRESH_ROOT_MIRROR. What it takes from this machine is only how
# to reach the network: the DNS resolver, and the CA files and proxies npm and
# Node are told of (npm's registry, cafile, proxy settings; NODE_EXTRA_CA_CERTS),
# so a registry behind a TLS proxy is reached as here. Nothing of npm's other
# settings (no nodedir).
#
# Needs root. When the mirror cannot be reached (or root is missing) it says so
# and exits 0, or 1 when CI=true. Everything it mounts stays inside its own mount
# namespace, and what it creates outside the cache is removed on exit. It checks
# the commit at HEAD: uncommitted changes are not in the clone.
#
# Usage: scripts/fresh-machine-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

SUITE=bookworm
CACHE_DIR=${FRESH_ROOT_CACHE:-/var/cache/cni-driver-fresh-root}
TARBALL="$CACHE_DIR/debian-$SUITE-minbase.tar"
CLEAN_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

say() { echo "fresh-machine-check: $*" >&2; }

# What this machine lacks for the check: a skip outside CI, a failure in CI.
cannot_check() {
  say "$*"
  if [ "${CI:-}" = "true" ]; then
    say "FAILED: CI must be able to run this check"
    exit 1
  fi
  say "skipped"
  exit 0
}

[ "$(id -u)" -eq 0 ] || cannot_check "needs root (debootstrap, chroot, a mount namespace)"
for tool in unshare chroot git tar; do
  command -v "$tool" >/dev/null || cannot_check "needs $tool"
done
if ! command -v debootstrap >/dev/null; then
  say "installing debootstrap"
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends debootstrap >/dev/null ||
    cannot_check "debootstrap is missing and apt could not install it"
fi

mirror=$(bash scripts/debian-rootfs.sh --mirror)
mirror_from=${FRESH_ROOT_MIRROR:+'$FRESH_ROOT_MIRROR'}
mirror_from=${mirror_from:-/etc/apt/sources.list*}
if ! wget -q -T 20 -t 2 -O /dev/null "$mirror/dists/$SUITE/InRelease"; then
  cannot_check "debootstrap cannot reach the Debian mirror $mirror (from $mirror_from)"
fi

mkdir -p "$CACHE_DIR/apt-archives"
# One check at a time on the shared cache.
exec 9>"$CACHE_DIR/.lock"
flock 9

work=$(mktemp -d /var/tmp/cni-driver-fresh.XXXXXX)
cleanup() {
  # Mounts live and die with the namespace of the commands that made them; the
  # host sees none under $work, so this stays on its file system.
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The root, from the cache shared with the image's base (scripts/debian-rootfs.sh).
bash scripts/debian-rootfs.sh >/dev/null || cannot_check "debootstrap could not build the root from $mirror"

prepared_from=$SECONDS
root="$work/root"
mkdir "$root"
tar -C "$root" --numeric-owner -xpf "$TARBALL"

# How this machine reaches the network, and nothing else of its configuration.
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
clean_env=(HOME=/root "PATH=$CLEAN_PATH" "TERM=${TERM:-dumb}")
for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
  [ -z "${!v:-}" ] || clean_env+=("$v=${!v}")
done
ca_dir=/etc/ssl/host-network-ca # not /etc/ssl/certs, which Debian's ca-certificates rewrites
mkdir -p "$root$ca_dir"
if [ -n "${NODE_EXTRA_CA_CERTS:-}" ] && [ -f "$NODE_EXTRA_CA_CERTS" ]; then
  cp -L "$NODE_EXTRA_CA_CERTS" "$root$ca_dir/node-extra-ca-certs.pem"
  clean_env+=("NODE_EXTRA_CA_CERTS=$ca_dir/node-extra-ca-certs.pem")
fi
npmrc="$root/etc/npmrc" # the global npmrc of Debian's npm
mkdir -p "$(dirname "$npmrc")"
: >"$npmrc"
while IFS= read -r line; do
  key=${line%%=*}
  value=${line#*=}
  case "$value" in "" | null | undefined) continue ;; esac
  if [ "$key" = cafile ]; then
    [ -f "$value" ] || continue
    cp -L "$value" "$root$ca_dir/npm-cafile.pem"
    value="$ca_dir/npm-cafile.pem"
  fi
  printf '%s=%s\n' "$key" "$value" >>"$npmrc"
done < <(npm config get registry cafile proxy https-proxy noproxy strict-ssl 2>/dev/null | sed -n 's/^\([a-z-]*\) *= *"\{0,1\}\([^"]*\)"\{0,1\}$/\1=\2/p')

git clone --quiet --no-hardlinks "$repo" "$root/root/cni-driver"
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  say "checking HEAD $(git rev-parse --short HEAD); uncommitted changes here are not in the clone"
fi

# Runs a command in the fresh root: a mount namespace of its own with /dev, /proc,
# /sys (which `ip netns exec` remounts) and a /run (where `ip netns` keeps its
# mounts), apt's .deb cache from $CACHE_DIR, then chroot, a clean environment and
# root's login shell.
in_root() {
  unshare --mount --propagation private -- bash -euc '
    root=$1 archives=$2
    shift 2
    mount --bind "$root" "$root" # a mount point as /, which `ip netns exec` makes a slave
    mount --rbind /dev "$root/dev"
    mount -t proc proc "$root/proc"
    mount -t sysfs sysfs "$root/sys"
    mount -t tmpfs -o mode=0755 tmpfs "$root/run"
    mount --bind "$archives" "$root/var/cache/apt/archives"
    exec chroot "$root" /usr/bin/env -i "$@"
  ' in-root "$root" "$CACHE_DIR/apt-archives" "${clean_env[@]}" /bin/bash -l -c "$1"
}

# The README's precondition: a Node and an npm; here Debian's own.
if ! in_root 'apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends nodejs npm >/dev/null && node --version && npm --version'; then
  say "FAILED: apt-get install nodejs npm in the fresh root"
  exit 1
fi
say "fresh root prepared (with Debian's nodejs and npm) in $((SECONDS - prepared_from)) s; npm run demo in it"
started=$SECONDS
if ! in_root 'cd ~/cni-driver && npm run demo'; then
  say "FAILED: npm run demo in a fresh Debian $SUITE root (its output above)"
  exit 1
fi
say "npm run demo took $((SECONDS - started)) s on the fresh root (setup included)"

if ! in_root 'cd ~/cni-driver && source scripts/use-node24.sh && npx --yes cni-driver --help >/dev/null && npx cni-driver serve --help | grep -q CNI_DRIVER_SOCKET'; then
  say "FAILED: npx cni-driver --help in the fresh root"
  exit 1
fi
say "npx cni-driver --help works"

# CI=true: everything setup installed is there, so a missing requirement fails.
started=$SECONDS
if ! in_root 'cd ~/cni-driver && source scripts/use-node24.sh && CI=true npx mocha test/integration/native-parts.test.ts'; then
  say "FAILED: test/integration/native-parts.test.ts in the fresh root"
  exit 1
fi
say "native-parts.test.ts took $((SECONDS - started)) s (the shim's build included)"
say "passed: the README's first command, the cni-driver command and the native parts on a fresh Debian $SUITE"
