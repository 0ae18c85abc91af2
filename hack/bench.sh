#!/usr/bin/env bash
# Usage: hack/bench.sh [--profile] [benchmark...]     (make bench runs it after make build)
#
# Runs the benchmarks under bench/: each starts its own etcd on free loopback ports and the built API (dist/) as a
# child process, measures, prints a report on stdout (progress on stderr) and stops what it started. They print
# numbers, they do not pass or fail. Settings: BENCH_SECONDS, BENCH_ROUNDS, BENCH_CONCURRENCY, ... (README.md,
# "Benchmarks"). --profile (or BENCH_PROFILE=1) also records a CPU profile of the API (reactors: and of the worker)
# and prints their hot spots.
#
# The benchmarks are TypeScript compiled by tsc with bench/tsconfig.json into dist-bench/ (no extra dependencies:
# Node 20 cannot run .ts itself). They reuse test/support/etcd.ts, compiled alongside.
set -euo pipefail
cd "$(dirname "$0")/.."

test -f dist/cli.js || { echo "hack/bench.sh: dist/cli.js is missing; run make bench (it builds first)" >&2; exit 1; }

TOKENVAULT_ETCD_BIN="${TOKENVAULT_ETCD_BIN:-$(hack/tools.sh etcd)}"
export TOKENVAULT_ETCD_BIN

rm -rf dist-bench
node_modules/.bin/tsc -p bench/tsconfig.json

exec node --no-node-snapshot dist-bench/bench/main.js "$@"
