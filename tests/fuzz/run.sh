#!/bin/sh
# Builds the fuzzers with clang (stand-alone, in build-fuzz/) and runs each in turn:
# fuzz_protocol (seeds: tests/fuzz/corpus) and fuzz_agent_expr (seeds: tests/fuzz/corpus_agent_expr).
# Usage: tests/fuzz/run.sh [SECONDS]   (default 600, per target)
#        FUZZ_TARGETS="agent_expr" tests/fuzz/run.sh 60   (a subset)
set -eu
seconds=${1:-600}
targets=${FUZZ_TARGETS:-"protocol agent_expr"}
root=$(cd "$(dirname "$0")/../.." && pwd)
build="$root/build-fuzz"
CC=clang CXX=clang++ cmake -S "$root/tests/fuzz" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
for t in $targets; do
  cmake --build "$build" --target "fuzz_$t" -j2
done
mkdir -p "$build/artifacts"
for t in $targets; do
  case $t in
    protocol) seeds="$root/tests/fuzz/corpus"; work="$build/corpus" ;;  # grows while fuzzing; the seeds stay untouched
    *) seeds="$root/tests/fuzz/corpus_$t"; work="$build/corpus_$t" ;;
  esac
  mkdir -p "$work"
  echo "== fuzz_$t for ${seconds}s"
  "$build/fuzz_$t" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$build/artifacts/$t-" -print_final_stats=1 "$work" "$seeds"
done
