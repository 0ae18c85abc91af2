#!/usr/bin/env bash
# Usage: hack/chromium.sh
#
# Prints the absolute path of a Chromium binary for the browser tests (test/support/browser.ts drives it with
# puppeteer-core, which downloads no browser). Only the path goes to stdout, so callers can write
# TOKENVAULT_CHROMIUM_BIN=$(hack/chromium.sh); progress goes to stderr.
#
# Lookup order: $TOKENVAULT_CHROMIUM_BIN; Debian's /usr/lib/chromium/chromium (the binary itself: the /usr/bin/chromium
# launcher script prints shell warnings on some machines). When it is missing and this runs as root with apt-get,
# Debian's `chromium` package is installed and the lookup runs again; otherwise it fails saying what to install.
set -euo pipefail

log() { echo "hack/chromium.sh: $*" >&2; }
die() { log "$*"; exit 1; }

if [[ -n ${TOKENVAULT_CHROMIUM_BIN:-} ]]; then
  [[ -x $TOKENVAULT_CHROMIUM_BIN ]] || die "TOKENVAULT_CHROMIUM_BIN=$TOKENVAULT_CHROMIUM_BIN is not an executable"
  echo "$TOKENVAULT_CHROMIUM_BIN"
  exit 0
fi

find_chromium() {
  local candidate
  for candidate in /usr/lib/chromium/chromium /usr/bin/chromium; do
    [[ -x $candidate ]] && { echo "$candidate"; return 0; }
  done
  return 1
}

if path=$(find_chromium); then
  echo "$path"
  exit 0
fi

[[ $(id -u) == 0 ]] && command -v apt-get >/dev/null ||
  die "no Chromium found; install it (Debian/Ubuntu: apt-get install chromium) or set TOKENVAULT_CHROMIUM_BIN"

log "installing Debian's chromium package (apt-get)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends chromium >&2
path=$(find_chromium) || die "installed chromium, but found no /usr/lib/chromium/chromium"
echo "$path"
