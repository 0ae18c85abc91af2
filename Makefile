# The two commands: `make run` and `make test`. Both install what is missing first.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# node-gyp cannot download Node headers here; the machine's Node ships its own under its install prefix. node-gyp reads
# npm_package_config_node_gyp_<key> as well as npm_config_<key>; the former is not an npm setting, so npm does not warn
# about it as an unknown one.
NODE_PREFIX := $(shell dirname "$$(dirname "$$(command -v node)")")
export npm_package_config_node_gyp_nodedir ?= $(NODE_PREFIX)
# Local binaries directly: npx is npm, which re-reads (and warns about) the user's npm configuration on every call.
BIN := node_modules/.bin

INSTALLED := node_modules/.tokenvault-installed
SOURCES := $(shell find src -name '*.ts' 2>/dev/null)
# The JavaScript that runs inside the reactor isolates, bundled into a committed TypeScript module (docs/runtime.md).
SANDBOX_SOURCES := $(wildcard src/runtime/worker/sandbox-code/*.js)
SANDBOX_BUNDLE := src/runtime/worker/prelude-bundle.ts
# The card fields' browser code (web/elements), bundled into dist/elements by hack/build-elements.mjs (docs/browser.md).
ELEMENTS_SOURCES := $(wildcard web/elements/*)

.PHONY: help install build run test test-unit lint bench typecheck sandbox clean e2e openapi schemathesis

help:
	@echo "make run    build and start tokenvault dev (prints the URL and a management key)"
	@echo "make test   run every test tier against a real etcd and a real kube-apiserver, and the integration tier"
	@echo "           again on a real PostgreSQL (installed with apt-get when missing: hack/postgres.sh)"
	@echo "make test-unit  the unit tier only: no services, seconds"
	@echo "make lint   type-check the sources, tests, benchmarks and sandbox code; check the layers (dependency-cruiser)"
	@echo "           and that the sandbox bundle is fresh"
	@echo "make sandbox  rebundle the sandbox code (src/runtime/worker/sandbox-code) into $(SANDBOX_BUNDLE)"
	@echo "make openapi  rewrite docs/openapi.json from the sources (the document GET /openapi.json serves)"
	@echo "make schemathesis  the API contract tests alone: Schemathesis against tokenvault dev (make test runs them too)"
	@echo "make bench  run the benchmarks"
	@echo "make e2e    the chart and the image on a real single-node cluster on this machine (root; see README)"

# npm install, not npm ci: npm 11 writes lock files without other platforms' optional bindings (unrs-resolver's),
# which npm ci then refuses as out of sync. --no-save keeps the committed lock file as it is.
$(INSTALLED): package.json package-lock.json
	npm install --no-audit --no-fund --no-save
	@test -f node_modules/isolated-vm/out/isolated_vm.node || { echo "isolated-vm did not build (is a C++ toolchain installed?)"; exit 1; }
	@touch $@

install: $(INSTALLED)

# Rewritten when a sandbox source changed; the result is committed, so the image build and ts-jest need no esbuild.
$(SANDBOX_BUNDLE): $(SANDBOX_SOURCES) hack/build-sandbox.mjs | $(INSTALLED)
	node hack/build-sandbox.mjs

sandbox: $(SANDBOX_BUNDLE)

dist/.built: $(INSTALLED) $(SOURCES) $(SANDBOX_BUNDLE) $(ELEMENTS_SOURCES) hack/build-elements.mjs tsconfig.json tsconfig.build.json
	rm -rf dist
	$(BIN)/tsc -p tsconfig.build.json
	node hack/build-elements.mjs
	@touch $@

build: dist/.built

run: build
	bin/tokenvault dev

typecheck: $(INSTALLED)
	$(BIN)/tsc -p tsconfig.json --noEmit

test: build
	hack/test.sh

test-unit: $(INSTALLED)
	NODE_OPTIONS="--experimental-vm-modules --no-node-snapshot $${NODE_OPTIONS:-}" $(BIN)/jest --ci --selectProjects unit

lint: typecheck
	$(BIN)/tsc -p bench/tsconfig.json --noEmit
	$(BIN)/tsc -p src/runtime/worker/sandbox-code/tsconfig.json
	node hack/build-sandbox.mjs --check
	$(BIN)/depcruise --config .dependency-cruiser.cjs src
	$(BIN)/eslint src test bench web
	$(BIN)/prettier --check src test bench web --log-level warn

bench: build
	hack/bench.sh

# The OpenAPI document (src/http/openapi); test/unit/openapi.test.ts fails while docs/openapi.json is stale.
openapi: build
	node hack/openapi.mjs

schemathesis: build
	node hack/schemathesis.mjs

# A real single-node Kubernetes cluster on this machine, the image built from this tree, the chart, the official SDKs
# through the API Service; stopped and cleaned at the end (hack/e2e/run.sh).
e2e: $(INSTALLED)
	hack/e2e/run.sh

clean:
	rm -rf dist node_modules
