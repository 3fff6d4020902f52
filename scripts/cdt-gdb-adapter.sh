#!/usr/bin/env bash
# Eclipse CDT's GDB debug adapter (npm package cdt-gdb-adapter: the Debug Adapter Protocol
# server of VS Code's "CDT GDB Debug Adapter Extension" and of Theia), for the IDE tests
# (tests/integration/test_cdt_gdb_adapter.py). It drives the real gdb over GDB/MI, as an IDE
# does, against branchstub as its remote target.
#
#   bash scripts/cdt-gdb-adapter.sh --setup-only   # install the pinned version (npm), once
#   bash scripts/cdt-gdb-adapter.sh --check        # exit 0 when installed; prints the adapter
#
# Prefix: $CDT_GDB_ADAPTER_PREFIX, else /opt/cdt-gdb-adapter when writable (or creatable), else
# ${XDG_CACHE_HOME:-~/.cache}/branchstub/cdt-gdb-adapter. The adapter for a remote target is
# <prefix>/node_modules/cdt-gdb-adapter/dist/debugTargetAdapter.js (run with node).
# Needs node and npm (scripts/setup-deps.sh installs Debian's when they are missing). The
# package's install scripts are not run: they build a pseudo-terminal addon that only local
# launches in an integrated terminal use.
set -euo pipefail

VERSION=1.7.0
mode=${1:---check}

if [[ -n ${CDT_GDB_ADAPTER_PREFIX:-} ]]; then
  prefix=$CDT_GDB_ADAPTER_PREFIX
elif { [[ -d /opt/cdt-gdb-adapter ]] && [[ -w /opt/cdt-gdb-adapter ]]; } ||
     { [[ ! -e /opt/cdt-gdb-adapter ]] && [[ -w /opt ]]; }; then
  prefix=/opt/cdt-gdb-adapter
else
  prefix=${XDG_CACHE_HOME:-$HOME/.cache}/branchstub/cdt-gdb-adapter
fi
adapter=$prefix/node_modules/cdt-gdb-adapter/dist/debugTargetAdapter.js
stamp=$prefix/.branchstub-cdt-gdb-adapter-$VERSION

ready() { [[ -f $stamp && -f $adapter ]]; }

case $mode in
  --check)
    ready || { echo "cdt-gdb-adapter: not installed under $prefix (run: bash scripts/cdt-gdb-adapter.sh --setup-only)" >&2; exit 1; }
    echo "$adapter"
    ;;
  --setup-only)
    if ready; then echo "cdt-gdb-adapter: $VERSION already under $prefix"; exit 0; fi
    command -v npm >/dev/null || { echo "cdt-gdb-adapter: npm not found (apt-get install nodejs npm)" >&2; exit 1; }
    mkdir -p "$prefix"
    echo "cdt-gdb-adapter: + npm install --prefix $prefix --ignore-scripts cdt-gdb-adapter@$VERSION"
    npm install --prefix "$prefix" --ignore-scripts --no-audit --no-fund --loglevel=error \
      "cdt-gdb-adapter@$VERSION"
    [[ -f $adapter ]] || { echo "cdt-gdb-adapter: $adapter missing after npm install" >&2; exit 1; }
    touch "$stamp"
    echo "cdt-gdb-adapter: $VERSION installed under $prefix"
    ;;
  -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) echo "cdt-gdb-adapter: unknown option $mode (see --help)" >&2; exit 2 ;;
esac
