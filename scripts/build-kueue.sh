#!/usr/bin/env bash
# Builds Kueue's manager (sigs.k8s.io/kueue/cmd/kueue) for the Kueue tests on the real control
# plane (tests/backends/kubernetes/kueue.py, docs/kubernetes.md "Kueue"), from the Go module
# pinned in platform/kube-testbed/kueue (versions.env KUEUE_VERSION), never downloaded prebuilt.
# Output: ${CAIRN_KUBE_CACHE:-~/.cache/cairn}/kueue-<version>/bin/kueue, outside the clone like the
# control plane's; a stamp makes a second run a no-op. Cold it is long (72 min on this 2-core
# machine under load, ~5 min of CPU); with Go's build cache warm it is only the link.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
testbed=$root/platform/kube-testbed
# shellcheck source=/dev/null
source "$testbed/versions.env"

cache=${CAIRN_KUBE_CACHE:-$HOME/.cache/cairn}
dir=$cache/kueue-$KUEUE_VERSION
bin=$dir/bin
stamp=$dir/stamp
recipe=1
want="recipe=$recipe kueue=$KUEUE_VERSION"

complete() { [[ -f $stamp && "$(cat "$stamp")" == "$want" && -x $bin/kueue ]]; }

if complete; then
  echo "kueue: $want already built in $bin"
  exit 0
fi

command -v go >/dev/null || { echo "kueue: go not found; Kueue is built from its Go module (Go 1.26)" >&2; exit 1; }
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
if complete; then echo "kueue: built meanwhile by another run: $bin"; exit 0; fi

export GOMAXPROCS=${GOMAXPROCS:-2}
export GOFLAGS="${GOFLAGS:-} -mod=readonly"
export GOTOOLCHAIN=local
staging=$dir/bin.partial
rm -rf "$staging" && mkdir -p "$staging"
t0=$SECONDS
echo "kueue: building sigs.k8s.io/kueue@$KUEUE_VERSION (cmd/kueue) ..."
if ! (cd "$testbed/kueue" && go build -p 2 -trimpath -ldflags="-s -w" -o "$staging/" sigs.k8s.io/kueue/cmd/kueue); then
  echo "kueue: FAILED to build sigs.k8s.io/kueue@$KUEUE_VERSION from platform/kube-testbed/kueue" >&2
  exit 1
fi
# the module the binary was built from must be the pinned one
go version -m "$staging/kueue" | grep -q "mod[[:space:]]*sigs.k8s.io/kueue[[:space:]]*$KUEUE_VERSION" || {
  echo "kueue: the built binary is not sigs.k8s.io/kueue $KUEUE_VERSION:" >&2; go version -m "$staging/kueue" | head -3 >&2; exit 1; }
rm -rf "$bin" && mv "$staging" "$bin"
echo "kueue $((SECONDS - t0))s" > "$dir/build-times.txt"
echo "$want" > "$stamp"
echo "kueue: built $want in $((SECONDS - t0)) s into $bin"
