#!/usr/bin/env bash
# Benchmark branchstub against Debian's gdbserver (not a pass/fail test).
#   bash bench/run.sh [--runs N] [--quick] [--only NAME] [--servers branchstub,gdbserver]
# Builds first (scripts/build.sh) unless BENCH_NO_BUILD=1. Writes bench/results/latest.md.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ${BENCH_NO_BUILD:-0} != 1 ]]; then
  bash scripts/build.sh >/dev/null
fi
exec /usr/bin/python3 bench/bench.py --build "${BUILD_DIR:-$PWD/build}" "$@"
