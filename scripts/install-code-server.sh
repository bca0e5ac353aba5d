#!/usr/bin/env bash
# Installs code-server (VS Code in the browser, for notebooks with `ide: vscode`) from the npm
# registry into a project-local folder, without the network access its own postinstall assumes.
#
#   scripts/install-code-server.sh VERSION DIR
#
# code-server's postinstall (postinstall.sh in the package) runs `npm install` in lib/vscode and
# lib/vscode/extensions, which builds native modules (node-gyp) and lets @vscode/ripgrep download
# its binary from GitHub, and node-gyp itself fetches Node's headers from nodejs.org. Here every
# package comes from the npm registry with install scripts off, and the same steps are done by
# hand: native modules are built from the sources they ship against the local Node headers,
# ripgrep is Debian's (`rg` on PATH), and the symlinks postinstall.sh makes are made here.
# Needs: Node.js 20 with its headers (include/node), a C++ toolchain, libkrb5-dev, ripgrep.
set -euo pipefail

VERSION=${1:?version}
DIR=${2:?directory}
say() { echo "code-server: $*"; }
fail() { echo "error: code-server: $*" >&2; exit 1; }

major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null) || fail "Node.js is not installed"
[ "$major" = 20 ] || fail "code-server $VERSION needs Node.js 20, this is Node.js $major"
rg=$(command -v rg) || fail "ripgrep is missing (apt-get install ripgrep)"
# node-gyp builds against these headers instead of downloading them.
node_prefix=$(dirname "$(dirname "$(readlink -f "$(command -v node)")")")
export npm_config_nodedir=${npm_config_nodedir:-$node_prefix}
[ -f "$npm_config_nodedir/include/node/node.h" ] || fail "Node's headers are not in $npm_config_nodedir/include/node"
node_gyp=$(dirname "$(readlink -f "$(command -v npm)")")/../node_modules/node-gyp/bin/node-gyp.js
[ -f "$node_gyp" ] || fail "npm's node-gyp is not at $node_gyp"
export npm_config_build_from_source=true  # argon2: no prebuilt download from GitHub
npm_quiet=(--no-audit --no-fund --loglevel=error --ignore-scripts)

rm -rf "$DIR" && mkdir -p "$DIR"
DIR=$(readlink -f "$DIR")
say "fetching code-server@$VERSION and its dependencies (npm, scripts off)"
npm install --prefix "$DIR" "${npm_quiet[@]}" "code-server@$VERSION"
say "building argon2 (imported at start-up, password hashing)"
(cd "$DIR" && npm rebuild --no-audit --no-fund --loglevel=error argon2 >/dev/null)

pkg=$DIR/node_modules/code-server
cd "$pkg/lib/vscode"
say "fetching VS Code's server dependencies (lib/vscode)"
npm install --omit=dev "${npm_quiet[@]}"
for module in node-pty native-watchdog kerberos @vscode/spdlog @vscode/deviceid; do
  say "building $module"
  (cd "node_modules/$module" && node "$node_gyp" rebuild >build.log 2>&1) \
    || { tail -n 30 "node_modules/$module/build.log" >&2; fail "building $module failed (above)"; }
done
# @parcel/watcher's Linux build comes as the npm package @parcel/watcher-linux-x64-glibc.
mkdir -p node_modules/@vscode/ripgrep/bin
ln -sfn "$rg" node_modules/@vscode/ripgrep/bin/rg
# What postinstall.sh links: the asar path extensions look in, the terminal's `code` and browser helpers.
ln -sfn node_modules node_modules.asar
ln -sfn code-linux.sh bin/remote-cli/code-server
ln -sfn browser-linux.sh bin/helpers/browser.sh
cd extensions
say "fetching the built-in extensions' shared dependency (typescript)"
npm install --omit=dev "${npm_quiet[@]}"
node postinstall.mjs >/dev/null

"$DIR/node_modules/.bin/code-server" --version >/dev/null || fail "the installed code-server does not start"
echo "$VERSION" >"$DIR/.installed"
say "$VERSION installed: $DIR/node_modules/.bin/code-server"
