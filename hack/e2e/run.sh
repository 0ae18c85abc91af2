#!/usr/bin/env bash
# `make e2e`: tokenvault on a real single-node Kubernetes cluster on this machine, end to end.
#   1. the Debian packages (apt-get, when missing) and the pinned binaries (hack/tools.sh, cached);
#   2. the images (hack/e2e/images.sh, cached by their inputs);
#   3. the cluster (hack/e2e/cluster.sh up), the scenario (hack/e2e/scenario.sh), and always the teardown
#      (hack/e2e/cluster.sh down), so that nothing keeps running and the next run starts clean.
# Needs root and apt-get (or the packages installed); says which is missing otherwise.
# TOKENVAULT_E2E_KEEP=1 leaves the cluster running for a look around (stop it with hack/e2e/cluster.sh down).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need_root
command -v go >/dev/null || die "Go is needed to build the cluster's binaries (hack/tools.sh); install Go 1.26 or later"
command -v node >/dev/null || die "Node is needed for the scenario's SDK client; install Node 20 or later"
[[ -d $REPO_ROOT/node_modules/@basis-theory/node-sdk ]] || die "node_modules is missing: run make install first"
mkdir -p "$CACHE_DIR"
ensure_packages

started=$SECONDS
log "tools (built into $CACHE_DIR/tools on the first run)"
for name in etcd etcdctl kube-apiserver kubectl helm kubelet kube-scheduler kube-controller-manager kube-proxy coredns kube-router; do
  tool "$name" >/dev/null
done
tools_done=$SECONDS
log "images"
"$E2E_HACK/images.sh" build
images_done=$SECONDS

cleanup() {
  local status=$?
  if [[ ${TOKENVAULT_E2E_KEEP:-} == 1 ]]; then
    log "TOKENVAULT_E2E_KEEP=1: the cluster keeps running; stop it with hack/e2e/cluster.sh down"
  else
    "$E2E_HACK/cluster.sh" down || true
  fi
  log "tools $((tools_done - started))s, images $((images_done - tools_done))s, cluster and scenario $((SECONDS - images_done))s"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

"$E2E_HACK/cluster.sh" up
"$E2E_HACK/scenario.sh"
log "make e2e passed in $((SECONDS - started))s"
