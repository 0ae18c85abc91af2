#!/usr/bin/env bash
# Usage: hack/postgres.sh
#
# Prints the absolute path of the directory holding PostgreSQL's server binaries (initdb, postgres), which the tests
# run as a throw-away server (test/support/postgres.ts). Only the path goes to stdout, so callers can write
# TOKENVAULT_POSTGRES_BIN_DIR=$(hack/postgres.sh); progress goes to stderr.
#
# Lookup order: $TOKENVAULT_POSTGRES_BIN_DIR; `pg_config --bindir`; the newest /usr/lib/postgresql/<version>/bin
# (Debian's layout). When none has them and this runs as root with apt-get, Debian's `postgresql` package is
# installed (PostgreSQL 15 on bookworm) and the lookup runs again; otherwise it fails saying what to install. Jest
# itself never installs anything: hack/test.sh calls this first.
set -euo pipefail

log() { echo "hack/postgres.sh: $*" >&2; }
die() { log "$*"; exit 1; }

has_server() { [[ -n $1 && -x $1/initdb && -x $1/postgres ]]; }

# A directory named by the caller is used or refused, never replaced by another (nor by an install).
if [[ -n ${TOKENVAULT_POSTGRES_BIN_DIR:-} ]]; then
  has_server "$TOKENVAULT_POSTGRES_BIN_DIR" || die "TOKENVAULT_POSTGRES_BIN_DIR=$TOKENVAULT_POSTGRES_BIN_DIR has no initdb and postgres"
  echo "$TOKENVAULT_POSTGRES_BIN_DIR"
  exit 0
fi

find_bin_dir() {
  local dir
  if command -v pg_config >/dev/null; then
    dir=$(pg_config --bindir 2>/dev/null || true)
    has_server "$dir" && { echo "$dir"; return 0; }
  fi
  # Newest version first.
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -n -r); do
    has_server "$dir" && { echo "$dir"; return 0; }
  done
  return 1
}

if dir=$(find_bin_dir); then
  echo "$dir"
  exit 0
fi

[[ $(id -u) == 0 ]] && command -v apt-get >/dev/null ||
  die "no PostgreSQL server binaries found; install PostgreSQL (Debian/Ubuntu: apt-get install postgresql) or set TOKENVAULT_POSTGRES_BIN_DIR to the directory of initdb and postgres"

log "installing Debian's postgresql package (apt-get)"
export DEBIAN_FRONTEND=noninteractive
# The package's own cluster (port 5432, started by its maintainer scripts) is not used by the tests; they start their
# own. Not creating it keeps a fresh machine's port 5432 free.
mkdir -p /etc/postgresql-common/createcluster.d
echo 'create_main_cluster = false' >/etc/postgresql-common/createcluster.d/tokenvault-tests.conf
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends postgresql >&2
dir=$(find_bin_dir) || die "installed postgresql, but found no initdb and postgres under /usr/lib/postgresql/*/bin"
echo "$dir"
