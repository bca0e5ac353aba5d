#!/usr/bin/env bash
# Builds the real Kubernetes control plane the Kubernetes tests run against (docs/kubernetes.md,
# "How this is tested"): kube-apiserver, kube-controller-manager, kube-scheduler, etcd, kwok and
# kustomize, all from Go modules (platform/kube-testbed/*), never downloaded prebuilt.
# Output: ${CAIRN_KUBE_CACHE:-~/.cache/cairn}/kube-<k8s version>/bin, outside the clone so a clean
# clone (CI) reuses it; a stamp with the pinned versions makes a second run a no-op.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
testbed=$root/platform/kube-testbed
# shellcheck source=/dev/null
source "$testbed/versions.env"

cache=${CAIRN_KUBE_CACHE:-$HOME/.cache/cairn}
dir=$cache/kube-$KUBE_VERSION
bin=$dir/bin
stamp=$dir/stamp
# recipe: bump when the way of building changes (flags), so caches of the old recipe are rebuilt
recipe=2
want="recipe=$recipe kubernetes=$KUBE_VERSION etcd=$ETCD_VERSION kwok=$KWOK_VERSION kustomize=$KUSTOMIZE_VERSION"
binaries=(kube-apiserver kube-controller-manager kube-scheduler etcd kwok kustomize)

complete() {
  [[ -f $stamp && "$(cat "$stamp")" == "$want" ]] || return 1
  for b in "${binaries[@]}"; do [[ -x $bin/$b ]] || return 1; done
}

if complete; then
  echo "kube: control plane $want already built in $bin"
  exit 0
fi

command -v go >/dev/null || { echo "kube: go not found; the control plane is built from Go modules (Go 1.26)" >&2; exit 1; }
mkdir -p "$dir"
# Two `make kube` at once (two clones, CI + a shell) would build twice and race on the rename.
exec 9>"$dir/.lock"
flock 9
if complete; then echo "kube: built meanwhile by another run: $bin"; exit 0; fi

# The machine has 2 cores shared with other work: cap parallelism explicitly.
export GOMAXPROCS=${GOMAXPROCS:-2}
export GOFLAGS="${GOFLAGS:-} -mod=readonly"
export GOTOOLCHAIN=local   # never fetch another Go toolchain
staging=$dir/bin.partial
rm -rf "$staging" && mkdir -p "$staging"
: > "$dir/build-times.txt"

# build <module dir> <module@version for messages> <extra ldflags> <package>...
build() {
  local mod=$1 what=$2 ldflags=$3; shift 3
  local t0=$SECONDS
  echo "kube: building $what ($*) ..."
  if ! (cd "$testbed/$mod" && go build -p 2 -trimpath -ldflags="-s -w $ldflags" -o "$staging/" "$@"); then
    echo "kube: FAILED to build $what from platform/kube-testbed/$mod (packages: $*)" >&2
    echo "kube: the pinned versions are in platform/kube-testbed/versions.env" >&2
    exit 1
  fi
  echo "kube: $what built in $((SECONDS - t0)) s"
  echo "$what $((SECONDS - t0))s" >> "$dir/build-times.txt"
}

t_all=$SECONDS
build etcd "go.etcd.io/etcd/server/v3@$ETCD_VERSION" "" .
build kwok "sigs.k8s.io/kwok@$KWOK_VERSION" "" sigs.k8s.io/kwok/cmd/kwok
build kustomize "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION" "" sigs.k8s.io/kustomize/kustomize/v5
# Without these the servers report v0.0.0-master (Kubernetes' own build sets them the same way).
minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
kv=k8s.io/component-base/version
build kubernetes "k8s.io/kubernetes@$KUBE_VERSION" \
  "-X $kv.gitVersion=$KUBE_VERSION -X $kv.gitMajor=1 -X $kv.gitMinor=$minor -X $kv.gitTreeState=clean" \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler

rm -rf "$bin" && mv "$staging" "$bin"
echo "total $((SECONDS - t_all))s" >> "$dir/build-times.txt"
echo "$want" > "$stamp"
echo "kube: built $want in $((SECONDS - t_all)) s into $bin:"
du -sh "$bin"/* "$bin"
