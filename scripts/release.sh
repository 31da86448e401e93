#!/usr/bin/env bash
# Cuts release VERSION from the checkout's head, in the two commits CHANGELOG.md asks for:
#   1. "Release VERSION": the Unreleased section becomes "## VERSION — DATE", and the
#      version is set where it is written down (package.json and its lock, the image tag
#      in the DaemonSet manifests and in the docs that show it);
#   2. "CHANGELOG: VERSION names the commit it was cut from": the section gains the line
#      "Commit: <id of commit 1>", which the upgrade tests build the release from.
# A release cannot name its own commit, hence two. Needs a clean tree, an Unreleased
# section and a version above package.json's. Usage: scripts/release.sh 0.4.0
set -euo pipefail
cd "$(dirname "$0")/.."

version=${1:-}
die() {
  echo "release: $*" >&2
  exit 1
}
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "usage: scripts/release.sh X.Y.Z (got '${version}')"
[ -z "$(git status --porcelain)" ] || die "the tree has uncommitted changes: commit or stash them first"
current=$(node -p 'require("./package.json").version')
highest=$(printf '%s\n%s\n' "$current" "$version" | sort -V | tail -n 1)
[ "$version" != "$current" ] && [ "$highest" = "$version" ] ||
  die "$version is not above the current version $current"
grep -q '^## Unreleased$' CHANGELOG.md || die "CHANGELOG.md has no '## Unreleased' section to release"

heading="## $version — $(date -u +%F)"
sed -i "s/^## Unreleased\$/$heading/" CHANGELOG.md
node -e '
  const fs = require("node:fs");
  const [version] = process.argv.slice(1);
  const rewrite = (file, edit) => {
    const json = JSON.parse(fs.readFileSync(file, "utf8"));
    edit(json);
    fs.writeFileSync(file, `${JSON.stringify(json, null, 2)}\n`);
  };
  rewrite("package.json", (p) => { p.version = version; });
  rewrite("package-lock.json", (l) => { l.version = version; l.packages[""].version = version; });
' "$version"
sed -i "s#cni-driver:$current#cni-driver:$version#g" \
  daemonset/daemonset.yaml daemonset/midonet-controller.yaml docs/install.md docs/image.md
git commit -q -a -m "Release $version" -m "What it holds: CHANGELOG.md's section $version."

commit=$(git rev-parse HEAD)
sed -i "s/^$heading\$/$heading\n\nCommit: $commit/" CHANGELOG.md
git commit -q -a -m "CHANGELOG: $version names the commit it was cut from"
echo "release $version cut from $commit"
