#!/usr/bin/env bash
# Configure and build branchstub into ./build (Ninja, RelWithDebInfo).
#   bash scripts/build.sh [extra cmake -D options...]
# Environment: BUILD_DIR (default: build), JOBS (default: nproc), TARGETS (default: all; a
# space-separated list, e.g. "branchstub branches" for the demo, which needs only those).
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}
targets=()
for t in ${TARGETS:-}; do targets+=(--target "$t"); done

# A build dir configured with another generator cannot be reused with Ninja.
if [[ -f "$build_dir/CMakeCache.txt" ]] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$build_dir/CMakeCache.txt"; then
  echo "build: $build_dir was configured with another generator; reconfiguring from scratch"
  rm -rf "$build_dir"
fi

echo "build: + cmake -S . -B $build_dir -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $*"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
echo "build: + cmake --build $build_dir -j $jobs ${targets[*]}"
cmake --build "$build_dir" -j "$jobs" "${targets[@]}"
