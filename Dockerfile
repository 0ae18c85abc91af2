# tokenvault: one image for every process (api, worker, controller, keys rotate); the Helm chart and config/ choose
# the subcommand with `args`.
#
#   docker build -t tokenvault:dev .
#   docker run --rm -p 8080:8080 tokenvault:dev dev --host 0.0.0.0
#
# Two stages: the build stage has the C++ toolchain (node:22-bookworm) that isolated-vm compiles with, the TypeScript
# compiler and the dev dependencies; the runtime stage (node:22-bookworm-slim) gets only dist/, the production
# node_modules (isolated-vm's compiled addon included) and package.json, and runs as an unprivileged user.

ARG NODE_IMAGE=node:22-bookworm
ARG NODE_RUNTIME_IMAGE=node:22-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
# node-gyp builds isolated-vm against the headers this image ships (no download of Node's headers).
ENV npm_config_update_notifier=false \
    npm_config_fund=false \
    npm_config_audit=false \
    npm_config_nodedir=/usr/local
# Dependencies first, so this layer is reused while only the sources change.
# npm install --no-save rather than npm ci: lock files written by npm 11 lack other platforms' optional bindings, which
# npm ci then refuses as out of sync (see the Makefile); --no-save installs exactly what the lock file pins without
# rewriting it. isolated-vm compiles its addon here with the image's python3, make and g++.
COPY package.json package-lock.json ./
RUN npm install --no-save \
 && test -f node_modules/isolated-vm/out/isolated_vm.node
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY web ./web
COPY hack/build-elements.mjs ./hack/build-elements.mjs
RUN npx tsc -p tsconfig.build.json \
 && node hack/build-elements.mjs \
 && npm prune --omit=dev \
 && test -f node_modules/isolated-vm/out/isolated_vm.node \
 && rm -rf node_modules/.cache

FROM ${NODE_RUNTIME_IMAGE} AS runtime
ENV NODE_ENV=production
# A numeric user, so that Kubernetes' runAsNonRoot can verify it without a passwd lookup (the Helm chart's
# podSecurityContext.runAsUser is the same number). The package managers the base image carries are not needed at run
# time: removed.
RUN groupadd --system --gid 10001 tokenvault \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin tokenvault \
 && rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack /opt/yarn-* \
      /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack /usr/local/bin/yarn /usr/local/bin/yarnpkg
WORKDIR /app
COPY --from=build --chown=root:root /app/package.json ./package.json
COPY --from=build --chown=root:root /app/node_modules ./node_modules
COPY --from=build --chown=root:root /app/dist ./dist
USER 10001:10001
EXPOSE 8080
# isolated-vm needs V8's startup snapshot off (as bin/tokenvault does).
ENTRYPOINT ["node", "--no-node-snapshot", "dist/cli.js"]
CMD ["--help"]
