#!/usr/bin/env bash
# Prints the path of a Debian 12 root filesystem as a tar, built when missing by
# `debootstrap --variant=minbase bookworm` from the Debian mirror this machine's
# apt uses, and cached as $FRESH_ROOT_CACHE/debian-bookworm-minbase.tar (default
# /var/cache/cni-driver-fresh-root; rebuilt after 30 days). scripts/build-image.sh
# makes the image's Debian base from it; scripts/fresh-machine-check.sh keeps its
# root in the same file, so the two share one download.
#
# Needs root (debootstrap). Nothing is fetched but Debian's packages, from
# $FRESH_ROOT_MIRROR when set.
#
# Usage: scripts/debian-rootfs.sh            the tarball's path, built when missing
#        scripts/debian-rootfs.sh --mirror   the mirror it builds from
set -euo pipefail

SUITE=bookworm
CACHE_DIR=${FRESH_ROOT_CACHE:-/var/cache/cni-driver-fresh-root}
TARBALL="$CACHE_DIR/debian-$SUITE-minbase.tar"
ROOT_MAX_AGE_DAYS=30

say() { echo "debian-rootfs: $*" >&2; }

# The Debian mirror this machine's apt uses (deb822 .sources or one-line .list).
debian_mirror() {
  {
    grep -hsE '^[[:space:]]*URIs:' /etc/apt/sources.list.d/*.sources | sed -E 's/^[[:space:]]*URIs:[[:space:]]*//' | tr ' ' '\n'
    grep -hsE '^[[:space:]]*deb[[:space:]]' /etc/apt/sources.list /etc/apt/sources.list.d/*.list |
      sed -E 's/^[[:space:]]*deb[[:space:]]+(\[[^]]*\][[:space:]]+)?//' | awk '{print $1}'
  } | grep -E '^https?://.*/debian/?$' | head -1
}

mirror=${FRESH_ROOT_MIRROR:-}
[ -n "$mirror" ] || mirror=$(debian_mirror || true) # a missing .list file is no error
mirror=${mirror:-http://deb.debian.org/debian}
mirror=${mirror%/}
if [ "${1:-}" = "--mirror" ]; then
  echo "$mirror"
  exit 0
fi

if [ -f "$TARBALL" ] && [ -z "$(find "$TARBALL" -mtime +"$ROOT_MAX_AGE_DAYS")" ]; then
  echo "$TARBALL"
  exit 0
fi

[ "$(id -u)" -eq 0 ] || {
  say "needs root to build $TARBALL (debootstrap)"
  exit 1
}
if ! command -v debootstrap >/dev/null; then
  say "installing debootstrap"
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends debootstrap >/dev/null
fi
mkdir -p "$CACHE_DIR"
work=$(mktemp -d /var/tmp/cni-driver-rootfs.XXXXXX)
trap 'rm -rf --one-file-system "$work"' EXIT
say "debootstrap --variant=minbase $SUITE from $mirror (cached as $TARBALL)"
started=$SECONDS
if ! debootstrap --variant=minbase "$SUITE" "$work/root" "$mirror" >"$work/debootstrap.log" 2>&1; then
  tail -20 "$work/debootstrap.log" >&2
  say "debootstrap could not build the root from $mirror (its log above)"
  exit 1
fi
# A name of its own, then a rename: another script building the same file at the
# same time costs a second download, never a torn tar.
tar -C "$work/root" --numeric-owner -cf "$TARBALL.tmp.$$" .
mv "$TARBALL.tmp.$$" "$TARBALL"
say "root built in $((SECONDS - started)) s"
echo "$TARBALL"
