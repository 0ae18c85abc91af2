#!/usr/bin/env bash
# Runs every test tier in one jest run, then the integration tier again on PostgreSQL. jest's global setup starts the
# services the tests need (etcd and PostgreSQL on free loopback ports) and its teardown stops them; the files under
# test/envtest start their own Kubernetes control plane (test/support/control-plane.ts). This script makes sure every
# binary exists first (hack/tools.sh finds or builds etcd, kube-apiserver, kubectl and helm; hack/postgres.sh finds or
# installs PostgreSQL, hack/chromium.sh Chromium, hack/python-sdk.sh Basis Theory's Python SDK), so a cold build is not
# counted against a test's timeout.
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
# PostgreSQL's server binaries (test/support/postgres.ts starts one per run); hack/postgres.sh installs Debian's
# package when they are missing, so jest never does.
if [ -z "${TOKENVAULT_POSTGRES_BIN_DIR:-}" ]; then
  TOKENVAULT_POSTGRES_BIN_DIR=$(hack/postgres.sh) || { echo "hack/postgres.sh failed" >&2; echo "0 passed, 1 failed"; exit 1; }
fi
export TOKENVAULT_POSTGRES_BIN_DIR
# Chromium for the browser tests (test/support/browser.ts drives it with puppeteer-core); hack/chromium.sh installs
# Debian's package when it is missing.
if [ -z "${TOKENVAULT_CHROMIUM_BIN:-}" ]; then
  TOKENVAULT_CHROMIUM_BIN=$(hack/chromium.sh) || { echo "hack/chromium.sh failed" >&2; echo "0 passed, 1 failed"; exit 1; }
fi
export TOKENVAULT_CHROMIUM_BIN
# Basis Theory's Python SDK for test/acceptance/python-sdk.test.ts: hack/python-sdk.sh makes (or reuses) a virtual
# environment outside the tree with the pinned basistheoryclient and pytest, and prints its interpreter.
if [ -z "${TOKENVAULT_PYTHON_SDK:-}" ]; then
  TOKENVAULT_PYTHON_SDK=$(hack/python-sdk.sh) || { echo "hack/python-sdk.sh failed" >&2; echo "0 passed, 1 failed"; exit 1; }
fi
export TOKENVAULT_PYTHON_SDK
export NODE_OPTIONS="--experimental-vm-modules --no-node-snapshot ${NODE_OPTIONS:-}"
# Tests that assert latency under load (a p99 while hostile requests run) run after the rest, one file at a time: on
# a 2-core machine a neighbouring test file's CPU would be measured as the vault's own latency.
SOLO=(test/integration/abuse-expressions.test.ts test/integration/abuse-isolation.test.ts)
# The integration tier runs a second time with its APIs and stores on PostgreSQL (TOKENVAULT_TEST_STORE=postgres:
# test/support/api.ts's testStoreUrl and openTestStore), except the files below. TOKENVAULT_TEST_ON_POSTGRES=0 skips
# that pass (counted as one skipped).
POSTGRES_SKIP=(
  # About etcd itself: what they test does not exist on PostgreSQL.
  test/integration/etcd-leases.test.ts       # etcd leases (the lease pool, keep-alives, expiry)
  test/integration/etcd-tls.test.ts          # TLS and client certificates to etcd
  test/integration/store-compaction.test.ts  # a watch across etcd's compaction of old revisions
  test/integration/store-full.test.ts        # etcd's space quota (NOSPACE alarm) and its recovery
  test/integration/store-leader.test.ts      # leader changes in a three-member etcd cluster
  test/integration/faults.test.ts            # kills, restarts and pauses an etcd of its own under load
  test/integration/observability.test.ts     # its APIs run on an etcd of its own, which it blackholes and stops
  # They start etcds of their own and kill them (store-migration moves a vault between etcd and PostgreSQL).
  test/integration/backup-restore.test.ts
  test/integration/interrupted-commands.test.ts # restore and keys rotate killed halfway
  test/integration/store-migration.test.ts      # names both stores itself
  # Already run in the first pass, on the stores they name themselves (the contract on every store; the PostgreSQL
  # store's own cases and the test PostgreSQL on TOKENVAULT_TEST_POSTGRES_URL).
  test/integration/store.contract.test.ts
  test/integration/postgres-store.test.ts
  test/integration/postgres-harness.test.ts
  test/integration/postgres-faults.test.ts # restarts and fills a PostgreSQL of its own (TOKENVAULT_STORE is its URL)
)

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
  if [ "${TOKENVAULT_TEST_ON_POSTGRES:-1}" = 0 ]; then
    echo "0 passed, 0 failed, 1 skipped" >"$summaries/postgres"
  else
    TOKENVAULT_TEST_STORE=postgres run_jest postgres --maxWorkers=2 --selectProjects integration \
      --testPathIgnorePatterns "${SOLO[@]}" "${POSTGRES_SKIP[@]}"
    TOKENVAULT_TEST_STORE=postgres run_jest postgres-solo --maxWorkers=1 --selectProjects integration \
      --runTestsByPath "${SOLO[@]}"
  fi
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
