#!/usr/bin/env bash
# The one test command (the README's and .ci/run's):
#
#   bash scripts/test.sh            # everything: deps, build, unit, integration, GDB's testsuite,
#                                   # fuzz smoke, kmod QEMU test
#   bash scripts/test.sh --quick    # skip GDB's testsuite, the fuzz smoke run and the kmod QEMU test
#   bash scripts/test.sh --no-deps  # do not run scripts/setup-deps.sh first
#
# Stages run in order; each prints a header. A stage whose test files are not in the tree
# (or which reports exit status 77, "skipped") is listed as skipped and counted neither way.
# The last line is always "N passed, M failed" (stages); the exit status is non-zero when
# any stage failed.
#
# Environment:
#   BUILD_DIR          build directory (default: build)
#   FUZZ_SECONDS       length of the fuzz smoke run (default: 60)
#   UNIT_TIMEOUT, INTEGRATION_TIMEOUT, GDB_TESTSUITE_TIMEOUT, FUZZ_TIMEOUT, KMOD_TIMEOUT,
#   BUILD_TIMEOUT      per-stage wall-clock limits in seconds (a whole run takes 16-32
#                      minutes on the 2-core Intel VMs, about 40 on an AMD EPYC guest whose
#                      page faults and process starts are slow; the limits leave room for it)
#   PYTEST_ARGS        extra arguments for pytest (e.g. "-k gdb -x")
#   INTEGRATION_JOBS   integration tests run at once (default: the CPUs, at most 4; 1: in turn)
#   GDB_TESTSUITE_OPTIONAL=1  report GDB's testsuite stage as skipped, not failed, when the
#                      testsuite cannot be fetched (no deb-src reachable); other GDB_TESTSUITE_*
#                      variables: see tests/gdb-testsuite/run.sh --help
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

quick=0
deps=1
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    --no-deps|--skip-deps) deps=0 ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test: unknown option: $arg" >&2; exit 2 ;;
  esac
done

build_dir=${BUILD_DIR:-build}
case "$build_dir" in /*) ;; *) build_dir=$root/$build_dir ;; esac
fuzz_seconds=${FUZZ_SECONDS:-60}

passed=()
failed=()
failed_why=()
stage_logs=$(mktemp -d "${TMPDIR:-/tmp}/branchstub-test.XXXXXX")
skipped=()
stage_no=0
start_all=$SECONDS

header() {
  stage_no=$((stage_no + 1))
  echo
  echo "================================================================"
  echo "== stage $stage_no: $1"
  echo "================================================================"
}

# run_stage NAME TIMEOUT COMMAND...   (TIMEOUT 0 = none)
run_stage() {
  local name=$1 limit=$2; shift 2
  header "$name"
  echo "+ $*"
  local t0=$SECONDS rc log=$stage_logs/stage-$stage_no.log
  # The output goes to the terminal and to a log, so the summary can name what failed
  # (CI shows only the tail of a run).
  if [[ $limit -gt 0 ]]; then
    timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$log"; rc=${PIPESTATUS[0]}
  else
    "$@" 2>&1 | tee "$log"; rc=${PIPESTATUS[0]}
  fi
  local dt=$((SECONDS - t0))
  if [[ $rc -eq 0 ]]; then
    echo "-- $name: PASSED (${dt}s)"; passed+=("$name")
  elif [[ $rc -eq 77 ]]; then
    echo "-- $name: SKIPPED by the test itself (${dt}s)"; skipped+=("$name (reported skip)")
  elif [[ $rc -eq 124 || $rc -eq 137 ]]; then
    echo "-- $name: FAILED: timed out after ${limit}s"; failed+=("$name (timeout)")
  else
    echo "-- $name: FAILED (exit $rc, ${dt}s)"; failed+=("$name")
  fi
  if [[ $rc -ne 0 && $rc -ne 77 ]]; then
    # pytest's "FAILED file::test", ctest's "(Failed)", DejaGnu's "FAIL:", a compiler error.
    local why
    why=$(grep -E '^(FAILED|ERROR) |\((Failed|Timeout|SEGFAULT|Subprocess aborted)\)|^FAIL: |error: ' "$log" \
          | head -n 12 | sed 's/^/      /')
    [[ -n $why ]] && failed_why+=("$name:"$'\n'"$why")
  fi
  return $rc
}

skip_stage() {
  header "$1"
  echo "-- $1: SKIPPED: $2"
  skipped+=("$1 ($2)")
}

# 1. dependencies
if [[ $deps == 1 ]]; then
  deps_args=()
  [[ $quick == 1 ]] && deps_args=(--no-kmod)
  run_stage "setup-deps" 0 bash scripts/setup-deps.sh "${deps_args[@]}"
else
  skip_stage "setup-deps" "--no-deps"
fi

# 2. build
build_ok=0
if BUILD_DIR=$build_dir run_stage "build" "${BUILD_TIMEOUT:-900}" bash scripts/build.sh; then
  build_ok=1
fi

if [[ $build_ok == 1 ]]; then
  # 3. unit tests
  run_stage "unit tests (ctest)" "${UNIT_TIMEOUT:-300}" \
    bash -c 'cd "$1" && ctest --output-on-failure' _ "$build_dir"

  # 4. integration suite (real gdb, lldb-16, and lldb-19 / lldb-dap-19 where setup-deps
  #    unpacked them, against the real server)
  if compgen -G "tests/integration/test_*.py" >/dev/null; then
    # Tests run INTEGRATION_JOBS at a time (pytest-xdist; default: the CPUs, at most 4): a
    # test mostly waits on GDB, LLDB and ptrace stops, so one at a time leaves half of two
    # CPUs idle (287 s one at a time, 160 s two at a time on 2 vCPUs). Each worker has its
    # own inferiors' token and plan directories, so workers never see each other's processes.
    jobs=${INTEGRATION_JOBS:-$(( $(nproc) < 4 ? $(nproc) : 4 ))}
    xdist=()
    if [[ $jobs -gt 1 ]] && /usr/bin/python3 -c 'import xdist' 2>/dev/null; then xdist=(-n "$jobs"); fi
    # shellcheck disable=SC2086
    BRANCHSTUB_BUILD=$build_dir run_stage "integration (pytest)" "${INTEGRATION_TIMEOUT:-1500}" \
      /usr/bin/python3 -m pytest -q "${xdist[@]}" tests/integration ${PYTEST_ARGS:-}
  else
    skip_stage "integration (pytest)" "no tests/integration/test_*.py yet"
  fi

  # 5. GDB's own testsuite (gdb.server, gdb.btrace on both gdbserver boards, gdb.multi on the
  #    extended one) against the committed expected results; prints its own "N passed,
  #    M failed" (test lines) first.
  if [[ $quick == 1 ]]; then
    skip_stage "gdb testsuite" "--quick"
  elif [[ -f tests/gdb-testsuite/run.sh ]]; then
    # Its own deadline comes first, so that a slow run still reports which lines it lost.
    # About 4-5 minutes on the Intel VMs; 15-16 on an AMD EPYC guest whose page faults and
    # process starts cost 3-5 times more (docs/compatibility.md, "The test.sh stage").
    gts_timeout=${GDB_TESTSUITE_TIMEOUT:-1500}
    BRANCHSTUB_BUILD=$build_dir GDB_TESTSUITE_DEADLINE=${GDB_TESTSUITE_DEADLINE:-$((gts_timeout - 90))} \
      run_stage "gdb testsuite (gdb.server, gdb.btrace, gdb.multi, gdb.reverse, gdb.trace)" "$gts_timeout" bash tests/gdb-testsuite/run.sh
  else
    skip_stage "gdb testsuite" "tests/gdb-testsuite/run.sh not in the tree yet"
  fi
  # 5b. gdb.btrace again with --synthesize-pt: GDB's `record btrace` asks for PT first, so
  #     every recording there is the software history decoded by libipt (~30 s): the same
  #     expected lines must pass.
  if [[ $quick != 1 && -f tests/gdb-testsuite/run.sh ]]; then
    BRANCHSTUB_BUILD=$build_dir GDB_TESTSUITE_SERVER_ARGS=--synthesize-pt GDB_TESTSUITE_WORK=$build_dir/gdb-testsuite-pt \
      run_stage "gdb testsuite, gdb.btrace as synthesized PT (--synthesize-pt)" 300 bash tests/gdb-testsuite/run.sh btrace
  fi

  # 6. fuzz smoke run
  if [[ $quick == 1 ]]; then
    skip_stage "fuzz smoke" "--quick"
  elif [[ -f tests/fuzz/run.sh ]]; then
    run_stage "fuzz smoke (${fuzz_seconds}s)" "${FUZZ_TIMEOUT:-$((fuzz_seconds + 300))}" \
      bash tests/fuzz/run.sh "$fuzz_seconds"
  else
    skip_stage "fuzz smoke" "tests/fuzz/run.sh not in the tree yet"
  fi
else
  skip_stage "unit tests (ctest)" "build failed"
  skip_stage "integration (pytest)" "build failed"
  skip_stage "gdb testsuite" "build failed"
  skip_stage "fuzz smoke" "build failed"
fi

# 7. kernel-module self-test in QEMU (does not need the C++ build)
if [[ $quick == 1 ]]; then
  skip_stage "kmod QEMU self-test" "--quick"
elif [[ -f kmod-helper/tests/qemu-selftest.sh ]]; then
  run_stage "kmod QEMU self-test" "${KMOD_TIMEOUT:-540}" bash kmod-helper/tests/qemu-selftest.sh
else
  skip_stage "kmod QEMU self-test" "kmod-helper/tests/qemu-selftest.sh not in the tree yet"
fi

echo
echo "================================================================"
echo "== summary ($((SECONDS - start_all))s)"
echo "================================================================"
# The host, so a run's tail says which machine it was (the suite must pass on Intel and AMD).
echo "  host: $(grep -m1 '^model name' /proc/cpuinfo | sed 's/.*: //'),$(grep -m1 '^vendor_id' /proc/cpuinfo | sed 's/.*://'), $(nproc) CPUs, $(uname -r)"
for s in "${passed[@]}";  do echo "  passed:  $s"; done
for s in "${failed[@]}";  do echo "  FAILED:  $s"; done
for s in "${skipped[@]}"; do echo "  skipped: $s"; done
if [[ ${#failed_why[@]} -gt 0 ]]; then
  echo "  what failed (first lines of each failed stage; logs in $stage_logs):"
  for s in "${failed_why[@]}"; do echo "    $s"; done
fi
echo "${#passed[@]} passed, ${#failed[@]} failed"
[[ ${#failed[@]} -eq 0 ]]
