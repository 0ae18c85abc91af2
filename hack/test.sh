#!/usr/bin/env bash
# Runs every test tier in one jest run. jest's global setup starts the services the tests need (etcd on free
# loopback ports) and its teardown stops them; the files under test/envtest start their own Kubernetes control plane
# (test/support/control-plane.ts). This script makes sure every binary exists first (hack/tools.sh finds or builds
# etcd, kube-apiserver, kubectl and helm), so a cold build is not counted against a test's timeout.
# The last line printed is "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."

# tool VARIABLE NAME: exports VARIABLE as the path of tool NAME, unless it is already set.
tool() {
  local path=${!1:-}
  if [ -z "$path" ]; then
    path=$(hack/tools.sh "$2") || { echo "hack/tools.sh $2 failed" >&2; echo "0 passed, 1 failed"; exit 1; }
  fi
  export "$1=$path"
}
tool TOKENVAULT_ETCD_BIN etcd
tool TOKENVAULT_KUBE_APISERVER_BIN kube-apiserver
tool TOKENVAULT_KUBECTL_BIN kubectl
tool TOKENVAULT_HELM_BIN helm
export NODE_OPTIONS="--experimental-vm-modules --no-node-snapshot ${NODE_OPTIONS:-}"
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
export TOKENVAULT_TEST_SUMMARY_FILE="$summary"

node_modules/.bin/jest --ci --maxWorkers=2 "$@"
status=$?

if [ -s "$summary" ]; then
  cat "$summary"
else
  echo "0 passed, 1 failed"   # jest ended before reporting: count the run as one failure
  [ "$status" -eq 0 ] && status=1
fi
exit "$status"
