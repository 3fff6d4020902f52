#!/bin/bash
# The test suite on another vendor's CPU: boots Debian 12's kernel under QEMU's TCG (no KVM, so
# CPUID is whatever -cpu says: GenuineIntel on an AMD host and the other way round) and runs the
# unit tests (ctest) and the integration tests (pytest) of an existing build in the guest.
# Too slow for CI (TCG runs 10-30x slower); see docs/testing-on-other-cpus.md.
#
# The guest sees the host's / read-only over virtio-9p, under a tmpfs overlay (so the tests may
# write anywhere, the build dir included, and nothing reaches the host), chroots into it and runs
# the host's own ctest, python3, gdb and lldb. Each CPU model's logs land in $WORK/out-<cpu>/
# (a writable 9p share): cpu.txt (CPUID as the guest sees it, `branchstub --probe`), ctest.log,
# pytest.log, and ps.txt (what runs in the guest, every 30 s, for hangs); the console shows the
# summaries. While a guest runs, its QEMU monitor listens on $WORK/monitor.sock (e.g. `info
# registers -a` to see where a vCPU loops).
#
# Usage (as root, Debian 12, the build done first: scripts/build.sh):
#   bash tests/vendor-vm/run.sh                  # Intel model, vendor-sensitive test files
#   VVM_CPUS="Skylake-Client-v4 EPYC" VVM_PYTEST=all bash tests/vendor-vm/run.sh
#
# Environment:
#   VVM_CPUS       QEMU CPU models, one boot each (default: Skylake-Client-v4, i.e. GenuineIntel)
#   VVM_PYTEST     pytest files/args relative to the repository root, "all" for tests/integration,
#                  "none" to skip (default: the vendor-sensitive files, $VENDOR_FILES below)
#   PYTEST_ARGS    extra pytest arguments (e.g. "-k pt")
#   VVM_CTEST      1 (default): run ctest; 0: skip it.  VVM_CTEST_ARGS: extra ctest arguments
#                  (e.g. "-R mem_access"); VVM_CTEST_TEST_TIMEOUT: seconds per test (default 900)
#   VVM_GUEST_CMD  a shell command run first in the guest (in the repository root; output in
#                  guest-cmd.log), e.g. to run one Catch2 section with -d yes to find a hang
#   VVM_TCG_WORKAROUNDS  1 (default): keep away from what TCG gets wrong (see the docs): no debug
#                  register under a single step (ctest -E the CPU table test, pytest -k "not
#                  hardware", the servers' watchpoints software); 0: run everything
#   VVM_TIMEOUT_SCALE  stretches the integration harness's deadlines (default 10: TCG is slow)
#   VVM_SMP, VVM_MEM  vCPUs (default 2) and MiB of guest memory (default 4096)
#   VVM_ACCEL      QEMU -accel value (default tcg,thread=multi)
#   VVM_TIMEOUT    seconds per boot (default 14400); the guest stops pytest a little earlier
#   VVM_WORKDIR    work/cache dir (default build-vendorvm/ at the repository root)
#   BUILD_DIR      the CMake build dir (default build/)
# Exit status: 0 when every boot's ctest and pytest passed.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WORK=${VVM_WORKDIR:-$ROOT/build-vendorvm}
CPUS=${VVM_CPUS:-Skylake-Client-v4}
SMP=${VVM_SMP:-2}
MEM=${VVM_MEM:-4096}
ACCEL=${VVM_ACCEL:-tcg,thread=multi}
TIMEOUT=${VVM_TIMEOUT:-14400}
VENDOR_FILES="tests/integration/test_btrace_pt.py tests/integration/test_probe.py tests/integration/test_watchpoints.py
 tests/integration/test_hardware_real.py tests/integration/test_btrace_hw_feeds.py"
PYSEL=${VVM_PYTEST:-$VENDOR_FILES}
[ "$PYSEL" = all ] && PYSEL=tests/integration
T0=$(date +%s)

log() { echo "[vendor-vm] $* ($(( $(date +%s) - T0 ))s)"; }
die() { echo "[vendor-vm] ERROR: $*"; echo "VENDOR-VM: FAIL"; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (the guest runs the tests as root, as CI does)"
for c in qemu-system-x86_64 busybox cpio strings; do command -v $c >/dev/null || die "$c missing (apt-get install qemu-system-x86 busybox-static cpio binutils)"; done
BDIR=${BUILD_DIR:-build}
case "$BDIR" in /*) ;; *) BDIR=$ROOT/$BDIR ;; esac
[ -x "$BDIR/server/branchstub" ] || die "$BDIR/server/branchstub missing: build first (scripts/build.sh) or set BUILD_DIR"
for d in "$ROOT" "$BDIR"; do
	case "$(readlink -f "$d")/" in /tmp/*|/var/tmp/*|/proc/*|/sys/*|/dev/*)
		die "$d lies under /tmp, /var/tmp, /proc, /sys or /dev, which the guest replaces with its own";;
	esac
done
mkdir -p "$WORK" && WORK=$(cd "$WORK" && pwd) || die "cannot create $WORK"

# ---- kernel and modules: 9p for the host's /, overlay for a writable view of it --------------
MODS="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci 9pnet 9pnet_virtio netfs fscache 9p overlay"
. "$ROOT/kmod-helper/tests/qemu-kernel.sh"
qemu_kernel_fetch "$WORK" "$MODS"
log "kernel $KVER: $KIMG"

# ---- initramfs ---------------------------------------------------------------------------------
R=$WORK/initramfs
rm -rf "$R" && mkdir -p "$R"/{bin,proc,sys,dev,tmp} || die "cannot create $R"
cp "$(command -v busybox)" "$R/bin/busybox" || die "cannot copy busybox"
qemu_kernel_copy_mods "$R/ko" "$MODS"
cat >"$R/conf" <<EOF
MODS="$MODS"
EOF
# shell-quoted: the *_ARGS are parsed in the guest as a shell would (e.g. -R 'a regex')
{
	printf '%s=%q\n' ROOT "$ROOT" BDIR "$BDIR" PYSEL "$PYSEL" PYTEST_ARGS "${PYTEST_ARGS:-}" \
		RUN_CTEST "${VVM_CTEST:-1}" CTEST_ARGS "${VVM_CTEST_ARGS:-}" CTEST_TEST_TIMEOUT "${VVM_CTEST_TEST_TIMEOUT:-900}" \
		GUEST_CMD "${VVM_GUEST_CMD:-}" TCG_WORKAROUNDS "${VVM_TCG_WORKAROUNDS:-1}" \
		TIMEOUT_SCALE "${VVM_TIMEOUT_SCALE:-10}" SMP "$SMP" PYTEST_TIMEOUT $((TIMEOUT > 1200 ? TIMEOUT - 600 : TIMEOUT * 3 / 4))
} >"$R/inner.conf"
cp "$HERE/guest-tests.sh" "$R/inner.sh" || die "cannot copy guest-tests.sh"
cat >"$R/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs dev /dev
. /conf
say() { echo "[guest] $*"; }
halt_with() { say "$*"; echo "GUEST-RESULT: FAIL"; poweroff -f; }
say "up after $(cut -d' ' -f1 /proc/uptime)s, kernel $(uname -r), $(nproc) CPU(s), $(grep -m1 vendor_id /proc/cpuinfo | tr -s '\t ' ' '), $(grep -m1 'model name' /proc/cpuinfo | tr -s '\t ' ' ')"
for m in $MODS; do insmod /ko/$m.ko || halt_with "insmod $m.ko failed"; done
mkdir -p /lower /rw /host
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=262144 hostroot /lower ||
	halt_with "cannot mount the host's / over 9p"
# the host's / read-only below, guest memory above: the tests write where they like
mount -t tmpfs -o size=75% rw /rw && mkdir -p /rw/upper /rw/work &&
	mount -t overlay overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work /host ||
	halt_with "cannot mount the overlay"
mount -t proc proc /host/proc && mount -t sysfs sysfs /host/sys && mount -t devtmpfs dev /host/dev &&
	mkdir -p /host/dev/pts /host/dev/shm && mount -t devpts -o ptmxmode=0666 devpts /host/dev/pts &&
	mount -t tmpfs shm /host/dev/shm && mount -t tmpfs tmp /host/tmp && mount -t tmpfs vartmp /host/var/tmp ||
	halt_with "mounts inside /host failed"
mkdir -p /host/vvm-out && mount -t 9p -o trans=virtio,version=9p2000.L,cache=none,msize=262144 out /host/vvm-out ||
	halt_with "cannot mount the output share"
# the symbols, to name the kernel addresses that `info registers -a` on the monitor shows (KASLR)
cat /proc/kallsyms >/host/vvm-out/kallsyms
ifconfig lo 127.0.0.1 netmask 255.0.0.0 up || halt_with "cannot bring up lo"
hostname vendor-vm
cp /inner.sh /inner.conf /host/tmp/ || halt_with "cannot copy the test script"
chroot /host /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	HOME=/root LANG=C.UTF-8 TERM=dumb TMPDIR=/tmp /bin/bash /tmp/inner.sh
rc=$?
[ $rc -eq 0 ] && echo "GUEST-RESULT: PASS" || echo "GUEST-RESULT: FAIL (exit $rc)"
sync
poweroff -f
INIT
chmod +x "$R/init"
(cd "$R" && find . | cpio -o -H newc --quiet | gzip -1 >"$WORK/initrd.gz") || die "cpio failed"
log "initramfs ready; tests: ctest=${VVM_CTEST:-1}, pytest: $(echo $PYSEL)"

# ---- one boot per CPU model --------------------------------------------------------------------
result=0
for cpu in $CPUS; do
	name=${cpu//[^A-Za-z0-9._-]/_}   # a model may carry options: Skylake-Client-v4,pmu=on
	out=$WORK/out-$name
	con=$WORK/console-$name.log
	rm -rf "$out" && mkdir -p "$out"
	log "booting under $ACCEL, -cpu $cpu, -smp $SMP, -m $MEM (logs: $out)"
	# mitigations=off: the tests do not need them, and PTI doubles the cost of a syscall under TCG
	timeout "$TIMEOUT" nice -n 10 qemu-system-x86_64 -accel "$ACCEL" -cpu "$cpu" -m "$MEM" -smp "$SMP" \
		-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
		-virtfs local,path="$out",mount_tag=out,security_model=none \
		-monitor unix:"$WORK/monitor.sock",server=on,wait=off -serial stdio -display none -no-reboot -kernel "$KIMG" -initrd "$WORK/initrd.gz" \
		-append 'console=ttyS0 panic=-1 loglevel=1 quiet mitigations=off' </dev/null 2>&1 |
		tr -d '\r' | sed 's/\x1b\[[0-9;?]*[a-zA-Z]//g' >"$con"
	grep -E '^\[guest\]|^GUEST-RESULT|BUG:|Oops|general protection|Kernel panic' "$con" | sed "s/^/  [$cpu] /"
	if grep -q '^GUEST-RESULT: PASS' "$con"; then
		log "-cpu $cpu: PASS"
	else
		log "-cpu $cpu: FAIL (console: $con; logs: $out)"
		result=1
	fi
done
echo "VENDOR-VM: $([ $result -eq 0 ] && echo PASS || echo FAIL) (cpus: $CPUS, $(( $(date +%s) - T0 ))s)"
exit $result
