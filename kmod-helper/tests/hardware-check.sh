#!/bin/bash
# Checks branchstub's hardware paths for real, on a machine that has them (Intel bare metal):
#
#   sudo bash kmod-helper/tests/hardware-check.sh
#
# from the repository root, as root (module load, perf). Steps: packages, build, the probe,
# msr_helper built against the running kernel and loaded for real (no simulate_lbr), its
# self-test, then the real-hardware tests (tests/integration/test_hardware_real.py: perf BTS,
# Intel PT, the LBR module, PTRACE_SINGLEBLOCK stepbranch, each against the single-step truth
# with the real GDB), then rmmod. The last line is
#   HARDWARE-CHECK: PASS (<verified mechanisms>; not on this machine: <mechanisms>)
# or HARDWARE-CHECK: FAIL (...). A mechanism the probe finds missing is listed with the reason,
# not counted as a failure; see kmod-helper/README.md for what to send back.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 1
BUILD=${BUILD_DIR:-$ROOT/build}
fails=()
step() { echo; echo "==== $*"; }

[ "$(id -u)" = 0 ] || { echo "run as root (insmod, perf)"; exit 1; }

step "packages"
bash scripts/setup-deps.sh --no-kmod || fails+=("packages")
dpkg -s "linux-headers-$(uname -r)" >/dev/null 2>&1 ||
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "linux-headers-$(uname -r)" ||
	fails+=("linux-headers-$(uname -r)")

step "build"
BUILD_DIR=$BUILD bash scripts/build.sh >/dev/null || { echo "build failed"; exit 1; }

step "probe (branchstub --probe)"
"$BUILD/server/branchstub" --probe | tee /tmp/hardware-check-probe.txt

step "msr_helper: build against $(uname -r), load for real, self-test"
loaded=0
if make -s -C kmod-helper KVER="$(uname -r)" modules selftest; then
	if lsmod | grep -q '^msr_helper '; then rmmod msr_helper; fi
	if insmod kmod-helper/msr_helper.ko; then
		loaded=1
		dmesg | grep 'msr_helper:' | tail -3
		kmod-helper/tests/selftest || fails+=("msr_helper self-test")
	else
		echo "insmod refused; the kernel log says why:"
		dmesg | grep 'msr_helper:' | tail -3
	fi
else
	fails+=("msr_helper build")
fi

step "real hardware tests"
BRANCHSTUB_BUILD=$BUILD /usr/bin/python3 -m pytest -v -rs tests/integration/test_hardware_real.py \
	tests/integration/test_probe.py | tee /tmp/hardware-check-tests.txt
[ "${PIPESTATUS[0]}" = 0 ] || fails+=("real hardware tests")

if [ $loaded = 1 ]; then
	step "msr_helper: unload"
	rmmod msr_helper || fails+=("rmmod")
	dmesg | grep 'msr_helper: unloaded' | tail -1
	dmesg | tail -n 200 | grep -E 'BUG:|WARNING:|Oops|general protection|Call Trace' && fails+=("kernel log")
fi

verified=$(sed -n 's/.*test_hardware_real.py::test_real_\([a-z_]*\) PASSED.*/\1/p' /tmp/hardware-check-tests.txt | paste -sd, -)
missing=$(sed -n 's/.*test_hardware_real.py::test_real_\([a-z_]*\) SKIPPED.*/\1/p' /tmp/hardware-check-tests.txt | paste -sd, -)
echo
if [ ${#fails[@]} -eq 0 ]; then
	echo "HARDWARE-CHECK: PASS (verified: ${verified:-none}; not on this machine: ${missing:-none})"
else
	echo "HARDWARE-CHECK: FAIL (${fails[*]}; verified: ${verified:-none}; not on this machine: ${missing:-none})"
	exit 1
fi
