#!/bin/bash
# Runs inside the tests/vendor-vm/run.sh guest, chrooted into the (overlaid) host's /: the unit
# and integration tests of the build, logs into /vvm-out, summaries on the console.
set -u
. /tmp/inner.conf
out=/vvm-out
say() { echo "[guest] $*"; }
since() { awk -v a="$1" -v b="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN { printf "%.0fs", b - a }'; }
cd "$ROOT" || { say "no $ROOT"; exit 1; }
ok=0
# QEMU 7.2's TCG: a single step (TF) over an instruction that hits a data watchpoint (DR0-3)
# makes the vCPU take #DB at the first instruction of the kernel's #DB handler, forever: that
# vCPU is lost to the guest. Keep the debug registers out of single steps.
ctest_skip=() pytest_skip=()
if [ "$TCG_WORKAROUNDS" = 1 ]; then
	ctest_skip=(-E 'every table entry agrees with the CPU')
	pytest_skip=(-k 'not hardware')
	export BRANCHSTUB_SERVER_ARGS=--watchpoints=software
fi
export BRANCHSTUB_TEST_TIMEOUT_SCALE=$TIMEOUT_SCALE
# What runs, every 30 s, for a hang: the share is written through, so the host can read it live.
( while sleep 30; do
	{ cut -d' ' -f1 /proc/uptime; ps -eo pid,ppid,etimes,time,stat,wchan:20,args --sort=start_time | cut -c1-200; } >"$out/ps.tmp" &&
		mv "$out/ps.tmp" "$out/ps.txt"
done ) &
watchdog=$!

{
	grep -m1 vendor_id /proc/cpuinfo; grep -m1 '^cpu family' /proc/cpuinfo; grep -m1 '^model' /proc/cpuinfo
	grep -m1 'model name' /proc/cpuinfo; grep -m1 '^flags' /proc/cpuinfo
	echo; "$BDIR/server/branchstub" --probe 2>&1
} >"$out/cpu.txt"
say "$(grep -m1 vendor_id "$out/cpu.txt" | tr -s '\t ' ' '), family $(grep -m1 '^cpu family' "$out/cpu.txt" | cut -d: -f2 | tr -d ' '), model $(grep -m1 '^model' "$out/cpu.txt" | cut -d: -f2 | tr -d ' ')"
sed -n '/^$/,$p' "$out/cpu.txt" | grep -E '  (yes|no)  ' | sed 's/^/[guest] probe: /'

if [ -n "$GUEST_CMD" ]; then
	t0=$(cut -d' ' -f1 /proc/uptime)
	timeout "$PYTEST_TIMEOUT" bash -c "$GUEST_CMD" >"$out/guest-cmd.log" 2>&1
	say "VVM_GUEST_CMD exit $? after $(since "$t0")"
fi

if [ "$RUN_CTEST" = 1 ]; then
	t0=$(cut -d' ' -f1 /proc/uptime)
	eval "set -- $CTEST_ARGS"
	(cd "$BDIR" && timeout "$PYTEST_TIMEOUT" ctest -j"$SMP" --timeout "$CTEST_TEST_TIMEOUT" -V "${ctest_skip[@]}" "$@") >"$out/ctest.log" 2>&1
	rc=$?
	say "ctest exit $rc after $(since "$t0"): $(grep -E 'tests passed' "$out/ctest.log" | tail -1)"
	grep -E '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*\*\*\*|^ *[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess|Not Run)' "$out/ctest.log" |
		sed 's/^/[guest] ctest: /'
	# Catch2's own lines that say what failed (file:line and the expansion follow in the log)
	grep -E '^[^ ].*\.cc:[0-9]+: FAILED:' "$out/ctest.log" | sort -u | head -20 | sed 's/^/[guest] ctest: /'
	[ $rc -eq 0 ] || ok=1
fi

if [ "$PYSEL" != none ]; then
	t0=$(cut -d' ' -f1 /proc/uptime)
	eval "set -- $PYSEL $PYTEST_ARGS"
	BRANCHSTUB_BUILD=$BDIR timeout "$PYTEST_TIMEOUT" /usr/bin/python3 -m pytest -q -p no:cacheprovider \
		--durations=15 "${pytest_skip[@]}" "$@" >"$out/pytest.log" 2>&1
	rc=$?
	say "pytest exit $rc after $(since "$t0")"
	sed -n '/short test summary info/,$p' "$out/pytest.log" | sed 's/^/[guest] pytest: /'
	[ $rc -eq 0 ] || ok=1
fi
kill $watchdog
sync
exit $ok
