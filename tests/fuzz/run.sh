#!/bin/sh
# Builds the fuzzers with clang (stand-alone, in build-fuzz/) and runs them side by side:
# fuzz_protocol (seeds: tests/fuzz/corpus) and fuzz_agent_expr (seeds: tests/fuzz/corpus_agent_expr).
# Usage: tests/fuzz/run.sh [SECONDS]   (default 600; the targets run at the same time)
#        FUZZ_TARGETS="agent_expr" tests/fuzz/run.sh 60   (a subset)
set -eu
seconds=${1:-600}
targets=${FUZZ_TARGETS:-"protocol agent_expr"}
root=$(cd "$(dirname "$0")/../.." && pwd)
build="$root/build-fuzz"
CC=clang CXX=clang++ cmake -S "$root/tests/fuzz" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
build_targets=""
for t in $targets; do build_targets="$build_targets fuzz_$t"; done
# shellcheck disable=SC2086
cmake --build "$build" -j"$(nproc)" --target $build_targets
mkdir -p "$build/artifacts"
# The targets fuzz side by side (one process each, libFuzzer is single-threaded): the run
# takes SECONDS, not SECONDS per target. Each one's output is shown whole when it ends.
pids=""
for t in $targets; do
  case $t in
    protocol) seeds="$root/tests/fuzz/corpus"; work="$build/corpus" ;;  # grows while fuzzing; the seeds stay untouched
    *) seeds="$root/tests/fuzz/corpus_$t"; work="$build/corpus_$t" ;;
  esac
  mkdir -p "$work"
  "$build/fuzz_$t" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$build/artifacts/$t-" -print_final_stats=1 "$work" "$seeds" >"$build/fuzz_$t.log" 2>&1 &
  pids="$pids $!:$t"
done
rc=0
for pt in $pids; do
  pid=${pt%%:*}; t=${pt#*:}
  if wait "$pid"; then status=passed; else status="FAILED (exit $?)"; rc=1; fi
  echo "== fuzz_$t for ${seconds}s: $status"
  tail -n 40 "$build/fuzz_$t.log"
done
exit $rc
