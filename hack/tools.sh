#!/usr/bin/env bash
# Usage: hack/tools.sh TOOL
#   TOOL: etcd, kube-apiserver, kubectl, helm (the test tiers), or kubelet, kube-scheduler, kube-controller-manager,
#   kube-proxy, coredns, kube-router (the single-node cluster of `make e2e`, hack/e2e/).
#
# Prints the absolute path of a binary the tests need, building it from the Go module proxy the first time.
# Only the path goes to stdout, so callers can write BIN=$(hack/tools.sh etcd); progress goes to stderr.
#
# Lookup order:
#   1. $KUBEBUILDER_ASSETS/<tool>, the envtest way (setup-envtest or a kubebuilder tools tarball), when its version is
#      recent enough;
#   2. etcd only: etcd on PATH (the e2e tools never come from KUBEBUILDER_ASSETS or PATH: always the pinned build). kube-apiserver, kubectl and helm are never taken from PATH: a machine's kubectl can be
#      any build (this one's /usr/bin/kubectl is unrelated to Kubernetes), and the tests must run the pinned
#      kube-apiserver/kubectl/helm, not whatever happens to be installed;
#   3. a cache that survives between runs, outside the tracked tree:
#      ${TOKENVAULT_TOOLS_DIR:-$HOME/.cache/tokenvault/tools}/<name>-v<version>/<tool>, built when missing.
# etcd, the Kubernetes commands, CoreDNS and kube-router are built from wrapper modules under hack/tools/<name>/ whose go.mod/go.sum pin the
# exact release; helm is `go install`ed at its pinned version (its go.mod has no replace directives, so go install
# accepts it, and its own go.sum pins its dependencies).
#
# TOKENVAULT_GO_BUILD_JOBS caps the packages compiled in parallel (go build -p); default: every CPU. A cold build
# (download + compile) of everything takes minutes; later runs only check versions.
set -euo pipefail

HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOOLS_DIR=${TOKENVAULT_TOOLS_DIR:-$HOME/.cache/tokenvault/tools}

ETCD_VERSION=3.6.16        # must match the require in hack/tools/etcd/go.mod
ETCD_MIN_VERSION=3.5.0
KUBERNETES_VERSION=1.37.2  # must match the require in hack/tools/kubernetes/go.mod (rewrite it with its pin.sh)
KUBERNETES_MIN_VERSION=1.30.0 # oldest kube-apiserver/kubectl accepted from KUBEBUILDER_ASSETS
COREDNS_VERSION=1.15.0     # must match the require in hack/tools/coredns/go.mod
KUBE_ROUTER_VERSION=2.1.0  # must match the require in hack/tools/kube-router/go.mod (docs/kubernetes.md, "End to end")
HELM_VERSION=4.3.1
HELM_MAJOR=4               # a helm from KUBEBUILDER_ASSETS must have this major version

log() { echo "hack/tools.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# version_at_least HAVE WANT: true when HAVE >= WANT (dotted versions).
version_at_least() {
  [[ -n $1 ]] && printf '%s\n%s\n' "$2" "$1" | sort -V -C
}

abspath() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }

build_jobs() {
  local jobs=${TOKENVAULT_GO_BUILD_JOBS:-}
  [[ -n $jobs ]] || jobs=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 4)
  [[ $jobs =~ ^[1-9][0-9]*$ ]] || die "TOKENVAULT_GO_BUILD_JOBS must be a positive number, not '$jobs'"
  echo "$jobs"
}

need_go() {
  command -v go >/dev/null ||
    die "Go is needed to build $1; install Go, or point KUBEBUILDER_ASSETS at a directory holding a prebuilt $1"
}

# in_place OUTPUT COMMAND...: runs COMMAND with $TMP_OUT set to a temporary path next to OUTPUT, then renames that
# file into place, so an interrupted build never leaves a truncated binary that a later run would mistake for a good
# one. Two builds racing each other both end with a complete binary (rename is atomic).
in_place() {
  local output=$1
  shift
  mkdir -p "$(dirname "$output")"
  TMP_OUT=$(mktemp -d "$output.tmp.XXXXXX")/out
  # shellcheck disable=SC2064 # expand now: the trap must remove this build's directory
  trap "rm -rf '$(dirname "$TMP_OUT")'" EXIT
  trap 'exit 130' INT # bash skips the EXIT trap when a signal kills it; exiting from a trap runs it
  trap 'exit 143' TERM
  "$@"
  chmod +x "$TMP_OUT"
  mv -f "$TMP_OUT" "$output"
  rm -rf "$(dirname "$TMP_OUT")"
  trap - EXIT INT TERM
}

# go_build MODULE_DIR PACKAGE OUTPUT [GO BUILD FLAGS...]: builds PACKAGE within the wrapper module MODULE_DIR.
go_build() {
  local module_dir=$1 package=$2 output=$3
  shift 3
  need_go "$(basename "$output")"
  log "building $package into $output (first run only; takes minutes)"
  # shellcheck disable=SC2016 # $TMP_OUT is expanded by the inner shell, after in_place has set it
  in_place "$output" bash -c 'cd "$1" && shift && go build -p "$JOBS" -trimpath -o "$TMP_OUT" "$@" >&2' _ \
    "$module_dir" "$@" "$package"
}

export JOBS TMP_OUT

# --- etcd -------------------------------------------------------------------------------------------------------

etcd_version() {
  "$1" --version 2>/dev/null | sed -n 's/^etcd Version: *//p' | head -n1
}

usable_etcd() {
  [[ -x $1 ]] && version_at_least "$(etcd_version "$1")" "$ETCD_MIN_VERSION"
}

tool_etcd() {
  if [[ -n ${KUBEBUILDER_ASSETS:-} ]] && usable_etcd "$KUBEBUILDER_ASSETS/etcd"; then
    abspath "$KUBEBUILDER_ASSETS/etcd"
    return
  fi
  local on_path
  if on_path=$(command -v etcd) && usable_etcd "$on_path"; then
    abspath "$on_path"
    return
  fi
  local cached=$TOOLS_DIR/etcd-v$ETCD_VERSION/etcd
  if ! usable_etcd "$cached"; then
    go_build "$HACK_DIR/tools/etcd" go.etcd.io/etcd/server/v3 "$cached"
    usable_etcd "$cached" || die "the etcd just built at $cached does not report version $ETCD_MIN_VERSION or later"
  fi
  echo "$cached"
}

# etcdctl of the same release: the e2e etcd image carries it, as the official image does.
tool_etcdctl() {
  local cached=$TOOLS_DIR/etcd-v$ETCD_VERSION/etcdctl
  if [[ ! -x $cached || $("$cached" version 2>/dev/null | sed -n 's/^etcdctl version: *//p') != "$ETCD_VERSION" ]]; then
    local -x CGO_ENABLED=0
    go_build "$HACK_DIR/tools/etcd" go.etcd.io/etcd/etcdctl/v3 "$cached" -ldflags "-s -w"
  fi
  echo "$cached"
}

# --- the Kubernetes commands --------------------------------------------------------------------------------------

# kube_version BINARY: the release a Kubernetes command reports, without the v ("1.37.2").
kube_version() {
  case $(basename "$1") in
    kubectl) "$1" version --client 2>/dev/null | sed -n 's/^Client Version: v\([0-9][0-9.]*\).*/\1/p' | head -n1 ;;
    *) "$1" --version 2>/dev/null | sed -n 's/^Kubernetes v\([0-9][0-9.]*\).*/\1/p' | head -n1 ;;
  esac
}

# tool_kube NAME: kube-apiserver, kubectl, kubelet, kube-scheduler, kube-controller-manager or kube-proxy. Only
# kube-apiserver and kubectl may come from KUBEBUILDER_ASSETS (envtest ships no others).
tool_kube() {
  local name=$1
  if [[ $name == kube-apiserver || $name == kubectl ]] &&
    [[ -n ${KUBEBUILDER_ASSETS:-} && -x $KUBEBUILDER_ASSETS/$name ]] &&
    version_at_least "$(kube_version "$KUBEBUILDER_ASSETS/$name")" "$KUBERNETES_MIN_VERSION"; then
    abspath "$KUBEBUILDER_ASSETS/$name"
    return
  fi
  local cached=$TOOLS_DIR/kubernetes-v$KUBERNETES_VERSION/$name
  if [[ ! -x $cached || $(kube_version "$cached") != "$KUBERNETES_VERSION" ]]; then
    # What the Kubernetes release build (hack/lib/version.sh) stamps in, so that --version, /version and kubectl's
    # version-skew check report the real release instead of v0.0.0-master. The build date stays fixed (1970).
    local minor=${KUBERNETES_VERSION#*.}
    minor=${minor%%.*}
    local ldflags="-s -w" package
    for package in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ldflags+=" -X $package.gitVersion=v$KUBERNETES_VERSION -X $package.gitMajor=1 -X $package.gitMinor=$minor"
      ldflags+=" -X $package.gitTreeState=clean"
    done
    # CGO off, as in the Kubernetes release build: static binaries, and no C toolchain needed.
    local -x CGO_ENABLED=0
    go_build "$HACK_DIR/tools/kubernetes" "k8s.io/kubernetes/cmd/$name" "$cached" -ldflags "$ldflags"
    [[ $(kube_version "$cached") == "$KUBERNETES_VERSION" ]] ||
      die "the $name just built at $cached does not report version v$KUBERNETES_VERSION"
  fi
  echo "$cached"
}

# --- coredns ------------------------------------------------------------------------------------------------------

coredns_version() {
  "$1" -version 2>/dev/null | sed -n 's/^CoreDNS-\([0-9][0-9.]*\).*/\1/p' | head -n1
}

tool_coredns() {
  local cached=$TOOLS_DIR/coredns-v$COREDNS_VERSION/coredns
  if [[ ! -x $cached || $(coredns_version "$cached") != "$COREDNS_VERSION" ]]; then
    local -x CGO_ENABLED=0 # static, as CoreDNS' release build: it runs in a scratch image
    go_build "$HACK_DIR/tools/coredns" github.com/coredns/coredns "$cached" -ldflags "-s -w"
    [[ $(coredns_version "$cached") == "$COREDNS_VERSION" ]] ||
      die "the coredns just built at $cached does not report version $COREDNS_VERSION"
  fi
  echo "$cached"
}

# --- kube-router --------------------------------------------------------------------------------------------------

kube_router_version() {
  "$1" --version 2>&1 | sed -n 's/.* version v\([0-9][0-9.]*\),.*/\1/p' | head -n1
}

# Only its network policy controller runs (make e2e): the bridge CNI plugin enforces no NetworkPolicy.
tool_kube_router() {
  local cached=$TOOLS_DIR/kube-router-v$KUBE_ROUTER_VERSION/kube-router
  if [[ ! -x $cached || $(kube_router_version "$cached") != "$KUBE_ROUTER_VERSION" ]]; then
    local -x CGO_ENABLED=0 # static, as kube-router's release build
    go_build "$HACK_DIR/tools/kube-router" github.com/cloudnativelabs/kube-router/v2/cmd/kube-router "$cached" \
      -ldflags "-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=v$KUBE_ROUTER_VERSION"
    [[ $(kube_router_version "$cached") == "$KUBE_ROUTER_VERSION" ]] ||
      die "the kube-router just built at $cached does not report version $KUBE_ROUTER_VERSION"
  fi
  echo "$cached"
}

# --- helm ---------------------------------------------------------------------------------------------------------

helm_version() {
  "$1" version --template '{{.Version}}' 2>/dev/null | sed -n 's/^v\([0-9][0-9.]*\).*/\1/p' | head -n1
}

tool_helm() {
  if [[ -n ${KUBEBUILDER_ASSETS:-} && -x $KUBEBUILDER_ASSETS/helm ]] &&
    [[ $(helm_version "$KUBEBUILDER_ASSETS/helm") == "$HELM_MAJOR".* ]]; then
    abspath "$KUBEBUILDER_ASSETS/helm"
    return
  fi
  local cached=$TOOLS_DIR/helm-v$HELM_VERSION/helm
  if [[ ! -x $cached || $(helm_version "$cached") != "$HELM_VERSION" ]]; then
    need_go helm
    local -x CGO_ENABLED=0 # as helm's release build
    local module=helm.sh/helm/v$HELM_MAJOR
    log "installing $module/cmd/helm@v$HELM_VERSION into $cached (first run only; takes minutes)"
    # go install writes into GOBIN; a private GOBIN per build keeps the rename into place atomic. The version is
    # stamped in as helm's own Makefile does (otherwise it reports only "v4.3").
    # shellcheck disable=SC2016 # $TMP_OUT is expanded by the inner shell, after in_place has set it
    in_place "$cached" bash -c 'GOBIN=$(dirname "$TMP_OUT") go install -p "$JOBS" -trimpath "$@" >&2 &&
      mv "$(dirname "$TMP_OUT")/helm" "$TMP_OUT"' _ \
      -ldflags "-s -w -X $module/internal/version.version=v$HELM_VERSION -X $module/internal/version.gitTreeState=clean" \
      "$module/cmd/helm@v$HELM_VERSION"
    [[ $(helm_version "$cached") == "$HELM_VERSION" ]] ||
      die "the helm just built at $cached does not report version v$HELM_VERSION"
  fi
  echo "$cached"
}

# --- main -------------------------------------------------------------------------------------------------------

usage() {
  echo "usage: $0 etcd|kube-apiserver|kubectl|helm|kubelet|kube-scheduler|kube-controller-manager|kube-proxy|coredns|kube-router|etcdctl" >&2
  exit 2
}

[[ $# -eq 1 ]] || usage
JOBS=$(build_jobs)

case $1 in
  etcd) tool_etcd ;;
  etcdctl) tool_etcdctl ;;
  kube-apiserver | kubectl | kubelet | kube-scheduler | kube-controller-manager | kube-proxy) tool_kube "$1" ;;
  coredns) tool_coredns ;;
  kube-router) tool_kube_router ;;
  helm) tool_helm ;;
  *) usage ;;
esac
