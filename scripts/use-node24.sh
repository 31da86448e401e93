# Sourced by the scripts behind the README's two commands and by CI: puts the pinned
# Node 24 and its npm (scripts/node24.sh) first on PATH, so that npm ci, the native
# addons, the demo and every test run on the Node the image ships, whatever Node ran
# `npm run`. It needs only a node and an npm able to fetch two packages (Debian 12's
# own `nodejs` and `npm` do).
#
# An outer `npm run` exports its settings as npm_config_*: the registry, proxy and
# CA settings must reach the inner npm, but not the outer Node's headers or node-gyp
# (scripts/build-native.sh takes the headers beside the running node).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "use-node24: needs a node and an npm on PATH to fetch Node 24 (on Debian 12: apt-get install nodejs npm)" >&2
  return 1
fi
if [ -z "${npm_config_globalconfig:-}" ]; then
  # The global npmrc of the Node that is here (a registry, proxy or cafile set there).
  npm_config_globalconfig=$(npm config get globalconfig 2>/dev/null || true)
  export npm_config_globalconfig
fi
node24_prefix=$(bash "$(dirname "${BASH_SOURCE[0]}")/node24.sh" --prefix) || return 1
export PATH="$node24_prefix/bin:$PATH"
export npm_config_node_gyp="$node24_prefix/lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js"
unset npm_config_nodedir npm_config_prefix npm_config_global_prefix npm_config_npm_version npm_config_user_agent
unset npm_node_execpath npm_execpath NODE
