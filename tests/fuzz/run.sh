#!/bin/sh
# Builds the protocol fuzzer with clang (stand-alone, in build-fuzz/) and runs it.
# Usage: tests/fuzz/run.sh [SECONDS]   (default 600)
set -eu
seconds=${1:-600}
root=$(cd "$(dirname "$0")/../.." && pwd)
build="$root/build-fuzz"
CC=clang CXX=clang++ cmake -S "$root/tests/fuzz" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target fuzz_protocol -j2
work="$build/corpus"            # grows while fuzzing; the seeds stay untouched
mkdir -p "$work" "$build/artifacts"
exec "$build/fuzz_protocol" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$build/artifacts/" -print_final_stats=1 "$work" "$root/tests/fuzz/corpus"
