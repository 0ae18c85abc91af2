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
# Tests that assert latency under load (a p99 while hostile requests run) run after the rest, one file at a time: on
# a 2-core machine a neighbouring test file's CPU would be measured as the vault's own latency.
SOLO=(test/integration/abuse-expressions.test.ts test/integration/abuse-isolation.test.ts)

summaries=$(mktemp -d)
trap 'rm -rf "$summaries"' EXIT

status=0
run_jest() { # run_jest NAME JEST-ARGS...
  local name=$1
  shift
  TOKENVAULT_TEST_SUMMARY_FILE="$summaries/$name" node_modules/.bin/jest --ci "$@" || status=1
  [ -s "$summaries/$name" ] || { echo "0 passed, 1 failed" >"$summaries/$name"; status=1; } # jest ended before reporting
}

if [ $# -gt 0 ]; then
  run_jest all --maxWorkers=2 "$@"
else
  run_jest shared --maxWorkers=2 --testPathIgnorePatterns "${SOLO[@]}"
  run_jest solo --maxWorkers=1 --runTestsByPath "${SOLO[@]}"
  # The API contract: Schemathesis against `tokenvault dev` (docs/api.md, "API contract"), counted as one test.
  # TOKENVAULT_SCHEMATHESIS=0 skips it (counted as skipped).
  if [ "${TOKENVAULT_SCHEMATHESIS:-1}" = 0 ]; then
    echo "0 passed, 0 failed, 1 skipped" >"$summaries/schemathesis"
  elif node hack/schemathesis.mjs; then
    echo "1 passed, 0 failed" >"$summaries/schemathesis"
  else
    echo "0 passed, 1 failed" >"$summaries/schemathesis"
    status=1
  fi
fi

# One closing line for the whole run: "N passed, N failed" (", N skipped" when any were).
cat "$summaries"/* | awk '
  { passed += $1; failed += $3; if ($5 != "") skipped += $5 }
  END { printf "%d passed, %d failed", passed, failed; if (skipped) printf ", %d skipped", skipped; printf "\n" }'
exit "$status"
