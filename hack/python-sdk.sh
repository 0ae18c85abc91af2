#!/usr/bin/env bash
# Usage: hack/python-sdk.sh
#
# Prints the absolute path of a Python interpreter in a virtual environment holding Basis Theory's Python SDK
# (basistheoryclient, pinned below) and pytest, for the Python SDK tier (test/python, driven by
# test/acceptance/python-sdk.test.ts). Only the path goes to stdout, so callers can write
# TOKENVAULT_PYTHON_SDK=$(hack/python-sdk.sh); progress goes to stderr.
#
# The environment lives outside the tree, under ${TOKENVAULT_CACHE_DIR:-~/.cache/tokenvault}/python-sdk-<version>,
# and is reused while it holds the pinned versions; it is created with `python3 -m venv` and pip from PyPI otherwise.
# Jest itself never installs anything: hack/test.sh calls this first.
set -euo pipefail

SDK_VERSION=7.4.0
PYTEST_VERSION=8.3.4

log() { echo "hack/python-sdk.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# An interpreter named by the caller is used or refused, never replaced.
if [[ -n ${TOKENVAULT_PYTHON_SDK:-} ]]; then
  "$TOKENVAULT_PYTHON_SDK" -c 'import basis_theory, pytest' 2>/dev/null ||
    die "TOKENVAULT_PYTHON_SDK=$TOKENVAULT_PYTHON_SDK cannot import basis_theory and pytest"
  echo "$TOKENVAULT_PYTHON_SDK"
  exit 0
fi

command -v python3 >/dev/null || die "python3 not found; install Python 3.9 or newer (Debian/Ubuntu: apt-get install python3 python3-venv)"

venv=${TOKENVAULT_CACHE_DIR:-$HOME/.cache/tokenvault}/python-sdk-$SDK_VERSION
python=$venv/bin/python
stamp=$venv/.tokenvault-installed

if [[ -f $stamp && $(cat "$stamp") == "basistheoryclient==$SDK_VERSION pytest==$PYTEST_VERSION" && -x $python ]]; then
  echo "$python"
  exit 0
fi

log "creating $venv (basistheoryclient==$SDK_VERSION, pytest==$PYTEST_VERSION from PyPI)"
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
python3 -m venv "$venv" >&2 || die "python3 -m venv failed (Debian/Ubuntu: apt-get install python3-venv)"
"$python" -m pip install --quiet --disable-pip-version-check \
  "basistheoryclient==$SDK_VERSION" "pytest==$PYTEST_VERSION" >&2 || die "pip install failed"
"$python" -c 'import basis_theory, pytest' || die "the new environment cannot import basis_theory and pytest"
echo "basistheoryclient==$SDK_VERSION pytest==$PYTEST_VERSION" >"$stamp"
echo "$python"
