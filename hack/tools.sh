#!/usr/bin/env bash
# Usage: hack/tools.sh TOOL
#
# Prints the absolute path of a binary the tests need, building it from the Go module proxy the first time.
# Only the path goes to stdout, so callers can write BIN=$(hack/tools.sh etcd); progress goes to stderr.
#
# Tools are looked up the envtest way first ($KUBEBUILDER_ASSETS), then on PATH, then in a cache that survives
# between runs (${TOKENVAULT_TOOLS_DIR:-$HOME/.cache/tokenvault/tools}/<tool>-v<version>/<tool>).
# Each tool has a wrapper module under hack/tools/<tool>/ whose go.mod/go.sum pin the exact release.
#
# Tools: etcd. (kube-apiserver, kubectl and helm will follow the same pattern.)
set -euo pipefail

HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOOLS_DIR=${TOKENVAULT_TOOLS_DIR:-$HOME/.cache/tokenvault/tools}

ETCD_VERSION=3.6.16   # must match the require in hack/tools/etcd/go.mod
ETCD_MIN_VERSION=3.5.0

log() { echo "hack/tools.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# version_at_least HAVE WANT: true when HAVE >= WANT (dotted versions).
version_at_least() {
  [[ -n $1 ]] && printf '%s\n%s\n' "$2" "$1" | sort -V -C
}

abspath() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }

# go_build MODULE_DIR PACKAGE OUTPUT: builds into a temporary file next to OUTPUT and renames it into place, so an
# interrupted build never leaves a truncated binary that a later run would mistake for a good one.
go_build() {
  local module_dir=$1 package=$2 output=$3
  command -v go >/dev/null || die "Go is needed to build $(basename "$output"); install Go, or point KUBEBUILDER_ASSETS or PATH at a prebuilt binary"
  mkdir -p "$(dirname "$output")"
  local tmp
  tmp=$(mktemp "$output.tmp.XXXXXX")
  # shellcheck disable=SC2064 # expand $tmp now: the trap must remove this build's file
  trap "rm -f '$tmp'" EXIT
  trap 'exit 130' INT # bash skips the EXIT trap when a signal kills it; exiting from a trap runs it
  trap 'exit 143' TERM
  log "building $package into $output (first run only; takes a minute or two)"
  (cd "$module_dir" && go build -trimpath -o "$tmp" "$package") >&2
  chmod +x "$tmp"
  mv -f "$tmp" "$output"
  trap - EXIT INT TERM
}

# --- etcd -------------------------------------------------------------------------------------------------------

etcd_version() {
  "$1" --version 2>/dev/null | sed -n 's/^etcd Version: *//p' | head -n1
}

usable_etcd() {
  [[ -x $1 ]] && version_at_least "$(etcd_version "$1")" "$ETCD_MIN_VERSION"
}

tool_etcd() {
  if [[ -n ${KUBEBUILDER_ASSETS:-} ]] && usable_etcd "$KUBEBUILDER_ASSETS/etcd"; then
    abspath "$KUBEBUILDER_ASSETS/etcd"
    return
  fi
  local on_path
  if on_path=$(command -v etcd) && usable_etcd "$on_path"; then
    abspath "$on_path"
    return
  fi
  local cached=$TOOLS_DIR/etcd-v$ETCD_VERSION/etcd
  if ! usable_etcd "$cached"; then
    go_build "$HACK_DIR/tools/etcd" go.etcd.io/etcd/server/v3 "$cached"
    usable_etcd "$cached" || die "the etcd just built at $cached does not report version $ETCD_MIN_VERSION or later"
  fi
  echo "$cached"
}

# --- main -------------------------------------------------------------------------------------------------------

usage() {
  echo "usage: $0 etcd" >&2
  exit 2
}

case ${1:-} in
  etcd) tool_etcd ;;
  kube-apiserver | kubectl | helm) die "$1 is not provided yet" ;;
  *) usage ;;
esac
