#!/usr/bin/env bash
# Builds dist/bin/cni-driver-shim: the shim as one small static C program that
# needs nothing on the host but a Linux kernel. Sources in src/remote-plugin-shim/;
# libraries from Debian, linked statically: libnghttp2 (HTTP/2), protobuf-c (the
# messages of src/remote-plugin-shim/shim.proto), jansson (JSON). scripts/setup.sh
# installs them (build-essential libnghttp2-dev libprotobuf-c-dev
# protobuf-c-compiler libjansson-dev).
#
# Usage: scripts/build-shim.sh [OUTPUT]   (default dist/bin/cni-driver-shim)
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-dist/bin/cni-driver-shim}
src=src/remote-plugin-shim
work=build/shim
CC=${CC:-cc}

for need in "$CC:build-essential" "protoc-c:protobuf-c-compiler"; do
  command -v "${need%%:*}" >/dev/null 2>&1 || {
    echo "build-shim: ${need%%:*} is missing (Debian package ${need#*:}; scripts/setup.sh installs it)" >&2
    exit 1
  }
done
for lib in libnghttp2:libnghttp2-dev libjansson:libjansson-dev libprotobuf-c:libprotobuf-c-dev; do
  if ! "$CC" -print-file-name="${lib%%:*}.a" | grep -q /; then
    echo "build-shim: ${lib%%:*}.a is missing (Debian package ${lib#*:}; scripts/setup.sh installs it)" >&2
    exit 1
  fi
done

mkdir -p "$work" "$(dirname "$out")"
protoc-c --c_out="$work" --proto_path="$src" "$src/shim.proto"

tmp="$out.tmp.$$"
trap 'rm -f "$tmp"' EXIT
# -Os and section garbage collection: the binary is exec'd for every pod, and its
# size is read from disk by each exec.
"$CC" -std=gnu11 -Os -Wall -Wextra -Werror -D_GNU_SOURCE \
  -ffunction-sections -fdata-sections -fno-asynchronous-unwind-tables \
  -I"$work" -I"$src" "$src"/*.c "$work/shim.pb-c.c" \
  -static -Wl,--gc-sections -s \
  -lnghttp2 -ljansson -lprotobuf-c -lm -o "$tmp"
chmod 0755 "$tmp"
mv "$tmp" "$out"
echo "build-shim: wrote $out ($(stat -c %s "$out") bytes, static)" >&2
