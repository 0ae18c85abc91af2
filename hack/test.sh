#!/usr/bin/env bash
# Runs every test tier in one jest run. jest's global setup starts the services the tests need (etcd on free
# loopback ports) and its teardown stops them; this script makes sure the binaries exist first, so a cold build is
# not counted against a test's timeout. The last line printed is "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."

TOKENVAULT_ETCD_BIN="${TOKENVAULT_ETCD_BIN:-$(hack/tools.sh etcd)}" || { echo "0 passed, 1 failed"; exit 1; }
export TOKENVAULT_ETCD_BIN
export NODE_OPTIONS="--experimental-vm-modules --no-node-snapshot ${NODE_OPTIONS:-}"
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
export TOKENVAULT_TEST_SUMMARY_FILE="$summary"

npx jest --ci --maxWorkers=2 "$@"
status=$?

if [ -s "$summary" ]; then
  cat "$summary"
else
  echo "0 passed, 1 failed"   # jest ended before reporting: count the run as one failure
  [ "$status" -eq 0 ] && status=1
fi
exit "$status"
