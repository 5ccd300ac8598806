#!/usr/bin/env bash
# Build the local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kubectl, kubelet, kwok, helm) from the Go module proxy into a cache outside the repository, keyed by
# the pinned versions. Prints the bin directory on stdout; progress goes to stderr.
#
#   tools/build.sh                   build what is missing, print the bin directory
#   tools/build.sh --print           print the bin directory without building
#   tools/build.sh --kstatus         build (if missing) only the kstatus checker, print its path
#   tools/build.sh --print-kstatus   print the kstatus checker's path without building
#
# The kstatus checker (tools/kstatus: what sigs.k8s.io/cli-utils' kstatus computes for an object)
# has its own cache directory and key, so changing it never rebuilds the control plane.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
K8S_VERSION="v1.37.2"
ETCD_VERSION="v3.6.16"
HELM_VERSION="v3.22.0"
KWOK_VERSION="v0.8.0"

# The cache key covers every pinned module file, so a version bump never reuses stale binaries.
key="$(cat "$here"/{etcd,helm,k8s,kwok}/go.mod "$here"/{etcd,helm,k8s,kwok}/go.sum | sha256sum | cut -c1-12)"
cache_root="${BINDERY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bindery}"
bin="$cache_root/k8s-$K8S_VERSION-$key/bin"
kstatus_key="$(cat "$here"/kstatus/{go.mod,go.sum,main.go} | sha256sum | cut -c1-12)"
kstatus_bin="$cache_root/kstatus-$kstatus_key/bin"

case "${1:-}" in
  --print) echo "$bin"; exit 0 ;;
  --print-kstatus) echo "$kstatus_bin/kstatus"; exit 0 ;;
  --kstatus | "") ;;
  *) echo "error: unknown argument ${1}; see the usage at the top of $0" >&2; exit 2 ;;
esac

if ! command -v go >/dev/null 2>&1; then
  echo "error: the Go toolchain is not on PATH; install Go >= 1.26 (it builds the local control plane)" >&2
  exit 1
fi

build_kstatus() { # under its own lock, so it never waits for (or holds up) a control-plane build
  mkdir -p "$kstatus_bin"
  (
    flock 8
    if [[ ! -x "$kstatus_bin/kstatus" ]]; then
      echo "building kstatus from tools/kstatus (cached at $kstatus_bin) ..." >&2
      start=$SECONDS
      (cd "$here/kstatus" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod \
        go build -trimpath -ldflags "-s -w" -o "$kstatus_bin/.kstatus.$$.tmp" .)
      mv "$kstatus_bin/.kstatus.$$.tmp" "$kstatus_bin/kstatus"
      echo "built kstatus in $((SECONDS - start))s" >&2
    fi
  ) 8>"$kstatus_bin/.lock"
}

if [[ "${1:-}" == "--kstatus" ]]; then
  build_kstatus
  echo "$kstatus_bin/kstatus"
  exit 0
fi

mkdir -p "$bin"
# One build at a time per cache: concurrent callers wait here, then find the binaries built.
exec 9>"$bin/.lock"
flock 9
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod

k8s_ldflags() {
  local minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  local flags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.gitCommit=bindery-build"
  done
  echo "$flags"
}

build() { # build <module dir> <output name> <package> [ldflags]
  local dir="$1" name="$2" pkg="$3" ldflags="${4:--s -w}"
  if [[ -x "$bin/$name" ]]; then
    return 0
  fi
  echo "building $name from $pkg (cached at $bin) ..." >&2
  local start=$SECONDS
  (cd "$here/$dir" && go build -trimpath -ldflags "$ldflags" -o "$bin/.$name.$$.tmp" "$pkg")
  mv "$bin/.$name.$$.tmp" "$bin/$name"
  echo "built $name in $((SECONDS - start))s" >&2
}

build etcd etcd go.etcd.io/etcd/server/v3
ldf="$(k8s_ldflags)"
build k8s kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$ldf"
build k8s kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$ldf"
build k8s kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$ldf"
build k8s kubectl k8s.io/kubernetes/cmd/kubectl "$ldf"
# The real node's kubelet, from the same module and version as the control plane.
build k8s kubelet k8s.io/kubernetes/cmd/kubelet "$ldf"
build kwok kwok sigs.k8s.io/kwok/cmd/kwok "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION"
# kwok needs Stage objects that say how fake nodes and pods move through their lifecycle; its
# module ships the standard "fast" set (nodes become Ready, pods become Running at once).
if [[ ! -s "$bin/kwok-stages.yaml" ]]; then
  kwok_dir="$(cd "$here/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)"
  for stage in node/fast/node-initialize node/heartbeat/node-heartbeat \
               pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
    echo "---"
    cat "$kwok_dir/kustomize/stage/$stage.yaml"
  done > "$bin/.kwok-stages.yaml.$$.tmp"
  mv "$bin/.kwok-stages.yaml.$$.tmp" "$bin/kwok-stages.yaml"
fi
build helm helm helm.sh/helm/v3/cmd/helm "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
build_kstatus

echo "$bin"
