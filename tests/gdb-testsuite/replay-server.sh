#!/usr/bin/env bash
# The server of the branchstub-replay board (the `reverse` set): takes gdbserver's command line
#
#   replay-server.sh [--once] [OPTIONS] COMM PROG [ARGS...]
#
# records PROG ARGS to its end with `branchstub record` (its output to record.log in the trace
# directory, stdin /dev/null), then execs `branchstub replay [OPTIONS] COMM TRACE`. GDB's
# gdb.reverse tests run a live program forward and then back; against a replay the "live" run
# is the recording played again, so the program must record to its end without input.
#
# Environment:
#   BRANCHSTUB                 the branchstub binary (run.sh sets it)
#   BRANCHSTUB_REPLAY_ARGS     extra options for `branchstub replay`, before the testsuite's
#   REPLAY_SERVER_RECORD_TIMEOUT  seconds the recording may take (default 120)
#
# If the program cannot be recorded (a syscall or threads record refuses, a timeout), this
# says why on stderr (the testsuite logs it in gdb.log) and exits 1 without "Listening on":
# the test's connection then fails, visibly, instead of running something else.
set -uo pipefail

me=replay-server
bs=${BRANCHSTUB:-}
[[ -n $bs && -x $bs ]] || { echo "$me: BRANCHSTUB is not set to the branchstub binary" >&2; exit 1; }

opts=()
while [[ $# -gt 0 && $1 == -* ]]; do
  case $1 in
    --wrapper|--attach|--multi)
      # No program to record ahead of time (or another program's command line in front).
      echo "$me: $1 is not supported: replay needs the program on the command line" >&2; exit 1 ;;
  esac
  opts+=("$1"); shift
done
[[ $# -ge 2 ]] || { echo "$me: usage: $0 [OPTIONS] COMM PROG [ARGS...]" >&2; exit 1; }
comm=$1 prog=$2
shift 2

# In the test's own output directory (the cwd runtest gives the server), so it goes with it.
trace=$(mktemp -d "$PWD/replay-trace.XXXXXX") || { echo "$me: cannot create a trace directory in $PWD" >&2; exit 1; }
timeout -k 5 "${REPLAY_SERVER_RECORD_TIMEOUT:-120}" "$bs" record -o "$trace" "$prog" "$@" \
  </dev/null >"$trace/record.log" 2>&1
rc=$?
# record writes the header last: without it there is nothing to replay (its exit status is
# the program's own, so it alone does not tell).
if [[ ! -f $trace/header ]]; then
  if [[ $rc == 124 || $rc == 137 ]]; then
    echo "$me: branchstub record $prog did not finish within ${REPLAY_SERVER_RECORD_TIMEOUT:-120}s (waits for input?)" >&2
  else
    echo "$me: branchstub record $prog failed (exit $rc); no trace to replay. Its last lines:" >&2
  fi
  tail -n 5 "$trace/record.log" | sed "s/^/$me:   /" >&2
  exit 1
fi
echo "$me: recorded $prog (exit $rc): $(tail -n 1 "$trace/record.log")" >&2

# shellcheck disable=SC2086  # BRANCHSTUB_REPLAY_ARGS is a list of words
exec "$bs" replay ${BRANCHSTUB_REPLAY_ARGS:-} "${opts[@]}" "$comm" "$trace"
