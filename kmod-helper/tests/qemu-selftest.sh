#!/bin/bash
# msr_helper end-to-end test in a throw-away QEMU (TCG) guest running Debian 12's own kernel.
#
# What it does (as root, on a Debian 12 machine with apt access; no KVM needed):
#   1. installs what is missing: linux-headers-amd64 qemu-system-x86 busybox-static cpio,
#      gcc g++ make catch2
#   2. pins KVER from linux-headers-amd64's Depends, so headers and kernel image always match
#   3. `apt-get download`s linux-image-$KVER (no install) and extracts vmlinuz into the work dir
#      (cached there between runs)
#   4. builds msr_helper.ko (in a copy under the work dir) and the static self-test, and also
#      builds the module against the newest linux-headers-*-amd64 apt knows (tests/build-check.sh:
#      downloaded and unpacked, not installed), so newer kernel APIs are checked too
#   5. builds a busybox initramfs and boots it once per CPU model in $MSRH_QEMU_CPUS; the guest:
#      (a) insmod msr_helper.ko            -> must fail with ENODEV, log why, leave no /dev node
#      (b) insmod msr_helper.ko simulate_lbr=1 -> selftest (attach, int3/step snapshots,
#          permissions, lifetime), then
#      (c) end-to-end, while the simulate_lbr=1 module is loaded: the host's / is shared
#          read-only over 9p (virtio-9p, modules from the same linux-image .deb), the guest
#          chroots into it and runs the REAL branchstub and the REAL /usr/bin/gdb:
#          `monitor lbr` arms, then prints the simulated branches after `continue`,
#          `record btrace bts` with `branchstub --btrace-source=lbr`, and both in one session
#          (one device handle: no EEXIST; `record stop` detaches) (see E2E below);
#          rmmod -> "0 object(s) outstanding", dmesg clean
#   6. prints the guest's relevant console lines and a final line; exit 0 = PASS, 1 = FAIL
#
# Environment:
#   MSRH_WORKDIR    work/cache dir (default: build-kmod/ at the repository root)
#   MSRH_QEMU_CPUS  CPU models to boot (default: "max Skylake-Client-v4")
#   QEMU_TIMEOUT    seconds per boot (default 240)
#   MSRH_E2E        1 (default): run phase (c); 0: skip it (module-only runs)
#   BUILD_DIR       branchstub's CMake build dir, as for scripts/test.sh (default: build/);
#                   phase (c) needs $BUILD_DIR/server/branchstub and $BUILD_DIR/inferiors/
#   MSRH_E2E_TIMEOUT  seconds per GDB session in the guest (default 60)
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MODSRC=$(cd "$HERE/.." && pwd)
ROOT=$(cd "$MODSRC/.." && pwd)
WORK=${MSRH_WORKDIR:-$ROOT/build-kmod}
CPUS=${MSRH_QEMU_CPUS:-"max Skylake-Client-v4"}
T0=$(date +%s)

log() { echo "[qemu-selftest] $* ($(( $(date +%s) - T0 ))s)"; }
die() { echo "[qemu-selftest] ERROR: $*"; echo "QEMU-SELFTEST: FAIL"; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (apt-get, and the guest test itself)"
mkdir -p "$WORK" || die "cannot create $WORK"
WORK=$(cd "$WORK" && pwd)

# ---- 1. packages -------------------------------------------------------------------------------
need=()
for p in linux-headers-amd64 qemu-system-x86 busybox-static cpio gcc g++ make libc6-dev catch2; do
	dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if ((${#need[@]})); then
	log "installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null || die "apt-get update failed"
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null ||
		die "apt-get install ${need[*]} failed"
fi

# ---- 2./3. kernel ABI from the headers meta package; the matching image (no install) ----------
# The 9p modules for phase (c), in load order (each one's depends= must come earlier).
E2E=${MSRH_E2E:-1}
E2E_MODS="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci 9pnet 9pnet_virtio netfs fscache 9p"
. "$HERE/qemu-kernel.sh"
mods=""; [ "$E2E" = 1 ] && mods=$E2E_MODS
qemu_kernel_fetch "$WORK" "$mods"
KDIR=/lib/modules/$KVER/build
[ -d "$KDIR" ] || die "$KDIR missing (linux-headers-$KVER not installed?)"
log "kernel headers $KVER"
log "kernel image $KIMG"
# ---- 4. build the module (in a copy: no build products in the source tree) and the self-test --
B=$WORK/mod
rm -rf "$B" && mkdir -p "$B/include/uapi" "$B/tests"
cp "$MODSRC/msr_helper.c" "$MODSRC/msr_helper_logic.h" "$MODSRC/Kbuild" "$B/" &&
	cp "$MODSRC/include/uapi/msr_helper.h" "$B/include/uapi/" &&
	cp "$MODSRC/tests/selftest.c" "$B/tests/" || die "cannot copy the sources"
make -s -C "$KDIR" M="$B" modules >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; die "module build failed"; }
grep -E 'warning|error' "$WORK/build.log" | grep -v 'Skipping BTF' && die "module build has warnings"
gcc -O2 -Wall -Wextra -Werror -static -o "$B/selftest" "$B/tests/selftest.c" || die "selftest build failed"
# the backend's C++ client (backend/btrace/lbr/lbr_device.cc) and its unit test, run in the guest too
g++ -std=c++20 -O0 -static -I"$ROOT" -o "$B/test_lbr_source" "$ROOT/tests/unit/catch_main.cc" \
	"$ROOT/tests/unit/backend/test_lbr_device.cc" "$ROOT/backend/btrace/lbr/lbr_device.cc" ||
	die "test_lbr_source build failed"
log "built msr_helper.ko, selftest and test_lbr_source"
if [ "${MSRH_BUILD_CHECK:-1}" = 1 ]; then
	bash "$HERE/build-check.sh" "$WORK/build-check" || die "msr_helper does not build against the newest kernel headers"
	log "build check against the newest kernel headers passed"
fi

# ---- 5. initramfs ---------------------------------------------------------------------------
R=$WORK/initramfs
rm -rf "$R" && mkdir -p "$R"/{bin,proc,sys,dev,tmp}
cp /bin/busybox "$R/bin/" && cp "$B/msr_helper.ko" "$B/selftest" "$B/test_lbr_source" "$R/" ||
	die "cannot fill initramfs"

# Phase (c): the guest chroots into the host's / (9p, read-only) and runs these programs from
# their host paths, with the host's libraries; its own /proc, /sys, /dev and a writable tmpfs
# /var/tmp are mounted over the host's, so nothing the test uses may live under those. (The
# host's /tmp stays visible, read-only: a CI clone may well live there.)
if [ "$E2E" = 1 ]; then
	BDIR=${BUILD_DIR:-build}
	case "$BDIR" in /*) ;; *) BDIR=$ROOT/$BDIR ;; esac
	BS=$BDIR/server/branchstub
	for f in "$BS" "$BDIR/inferiors/bploop" "$BDIR/inferiors/branches" /usr/bin/gdb; do
		[ -x "$f" ] || die "phase (c) needs $f (build branchstub first: scripts/build.sh, or set BUILD_DIR; MSRH_E2E=0 skips the phase)"
		f=$(readlink -f "$f")
		case "$f" in /var/tmp/*|/proc/*|/sys/*|/dev/*)
			die "phase (c): $f is under /var/tmp, /proc, /sys or /dev, which the guest's chroot replaces";;
		esac
	done
	qemu_kernel_copy_mods "$R/e2e/ko" "$E2E_MODS"
	cat >"$R/e2e/conf" <<-EOF
		E2E_MODS="$E2E_MODS"
		E2E_TIMEOUT=${MSRH_E2E_TIMEOUT:-60}
		E2E_BPLOOP=$BDIR/inferiors/bploop
		E2E_BRANCHES=$BDIR/inferiors/branches
	EOF
	# one GDB command per line; each becomes an -ex, so one failing command does not end the session
	settings='set pagination off
set confirm off
set width 0
set auto-load off
set debuginfod enabled off
set sysroot /'
	cat >"$R/e2e/lbr.cmds" <<-EOF
		$settings
		target remote | $BS - $BDIR/inferiors/bploop 3
		break hit
		continue
		monitor lbr
		continue
		monitor lbr
		kill
	EOF
	cat >"$R/e2e/btrace.cmds" <<-EOF
		$settings
		target remote | $BS --btrace-source=lbr - $BDIR/inferiors/branches
		break trace_begin
		break trace_end
		continue
		record btrace bts
		monitor btrace status
		continue
		info record
		monitor btrace status
		monitor btrace history 3
		kill
	EOF
	# (c3) monitor lbr and record btrace in one session: one device handle (a second one got
	# EEXIST and an empty trace), and `record stop` detaches (monitor lbr must arm again)
	cat >"$R/e2e/shared.cmds" <<-EOF
		$settings
		target remote | $BS --btrace-source=lbr - $BDIR/inferiors/bploop 3
		break hit
		continue
		monitor lbr
		record btrace bts
		continue
		info record
		monitor lbr
		record stop
		monitor lbr
		kill
	EOF
	log "phase (c): $BS, /usr/bin/gdb ($(gdb --version | head -1)) over 9p"
else
	log "phase (c) skipped (MSRH_E2E=$E2E)"
fi
cat >"$R/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs dev /dev
echo "[guest] up after $(cut -d' ' -f1 /proc/uptime)s, kernel $(uname -r), $(grep -m1 'model name' /proc/cpuinfo)"
ok=1
fail() { echo "[guest] FAIL: $*"; ok=0; }

dmesg >/tmp/dmesg.boot   # only what happens from here on is checked for BUG/WARNING/Oops
# (a) without the test parameter: TCG drops DEBUGCTL.LBR, the module must refuse with ENODEV
out=$(insmod /msr_helper.ko 2>&1); rc=$?
echo "[guest] (a) insmod msr_helper.ko -> rc=$rc: $out"
[ $rc -ne 0 ] || fail "(a) module loaded on a CPU without working LBR"
echo "$out" | grep -q 'No such device' || fail "(a) insmod error is not ENODEV"
dmesg | grep -q 'msr_helper: refusing to load (-ENODEV): DEBUGCTL.LBR did not stick' ||
	fail "(a) no kernel log line saying why"
[ ! -e /dev/msr_helper ] || fail "(a) /dev/msr_helper exists"
/selftest --expect-absent || fail "(a) selftest --expect-absent"

# (b) simulate_lbr=1 (TEST ONLY): plumbing, permissions, lifetime
insmod /msr_helper.ko simulate_lbr=1 || fail "(b) insmod simulate_lbr=1"
/selftest; rc=$?
echo "[guest] (b) selftest exit $rc"; [ $rc -eq 0 ] || fail "(b) selftest"
/test_lbr_source >/tmp/client.log 2>&1; rc=$?
sed 's/^/[guest] client: /' /tmp/client.log | grep -vE ': *$|~~~|\.\.\.\.|----' 
echo "[guest] (b) backend client test (test_lbr_source) exit $rc"
[ $rc -eq 0 ] || fail "(b) backend client test"
grep -q SKIP /tmp/client.log && fail "(b) backend client test skipped the device test"

# (c) end-to-end: the real branchstub and the real gdb (host's /, read-only over 9p, chroot)
# against this simulate_lbr=1 module
e2e_gdb() { # NAME CMDFILE PROGRAM: run gdb -nx -batch with one -ex per line, log in /tmp/NAME.log
	local name=$1 cmds=$2 prog=$3 t0=$(cut -d' ' -f1 /proc/uptime) rc line
	set --
	while IFS= read -r line; do set -- "$@" -ex "$line"; done <"$cmds"
	timeout "$E2E_TIMEOUT" chroot /host /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/var/tmp TMPDIR=/var/tmp \
		LANG=C TERM=dumb /usr/bin/gdb -nx -batch "$@" "$prog" >/tmp/$name.log 2>&1
	rc=$?
	# GDB warns once per undecodable block; show two of them and the count
	awk -v p="[guest] gdb-$name: " '/Recorded trace may be corrupted/ { if (++n > 2) next }
		{ print p $0 } END { if (n > 2) print p "... (" n " \"Recorded trace may be corrupted\" warnings in all)" }' /tmp/$name.log
	echo "[guest] (c) gdb-$name exit $rc after $(awk -v a=$t0 -v b=$(cut -d' ' -f1 /proc/uptime) 'BEGIN{printf "%.1f", b-a}')s"
	[ $rc -ne 124 ] && [ $rc -ne 143 ] || fail "(c) gdb-$name timed out after ${E2E_TIMEOUT}s"
}
e2e() {
	. /e2e/conf
	local t0=$(cut -d' ' -f1 /proc/uptime) m
	for m in $E2E_MODS; do insmod /e2e/ko/$m.ko || { fail "(c) insmod $m.ko"; return; }; done
	mkdir -p /host
	mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=262144 hostroot /host ||
		{ fail "(c) mount the host's / over 9p"; return; }
	mount -t proc proc /host/proc && mount -t sysfs sysfs /host/sys && mount -t devtmpfs dev /host/dev &&
		mount -t tmpfs tmp /host/var/tmp || { fail "(c) mounts inside /host"; return; }
	echo "[guest] (c) host / mounted over 9p after $(awk -v a=$t0 -v b=$(cut -d' ' -f1 /proc/uptime) 'BEGIN{printf "%.1f", b-a}')s"

	# (c1) monitor lbr: the first call arms, the next stop has the simulated snapshot
	e2e_gdb lbr /e2e/lbr.cmds "$E2E_BPLOOP"
	L=/tmp/lbr.log
	grep -q '^LBR armed for thread [0-9]*: the next stop takes a snapshot' $L ||
		fail "(c1) the first 'monitor lbr' did not arm"
	grep -qF 'Last 16 branches before this stop (newest last) [SIMULATED LBR: test mode]:' $L ||
		fail "(c1) no simulated snapshot after continue"
	a=$(grep -n '^LBR armed' $L | head -1 | cut -d: -f1); b=$(grep -n '^Last 16 branches' $L | head -1 | cut -d: -f1)
	[ -n "$a" ] && [ -n "$b" ] && [ "$a" -lt "$b" ] || fail "(c1) arm/snapshot out of order"
	n=$(grep -c '^branch 0x[0-9a-f]* <.*> -> 0x[0-9a-f]* <.*>$' $L)
	[ "$n" = 16 ] || fail "(c1) expected 16 branch lines, got $n"
	# newest entry (printed last): to = the int3 address = the breakpoint's address, in hit()
	bp=$(sed -n 's/^Breakpoint 1 at \(0x[0-9a-f]*\): .*/\1/p' $L | head -1)
	last=$(grep '^branch 0x' $L | tail -1)
	echo "$last" | grep -q -- "-> $bp <hit+0x[0-9a-f]*>\$" ||
		fail "(c1) newest branch '$last' does not end at the breakpoint $bp in hit"
	grep -q 'Breakpoint 1, hit (i=1)' $L || fail "(c1) second stop is not hit(i=1)"
	grep -q '^\[Inferior 1 (process [0-9]*) killed\]' $L || fail "(c1) kill"

	# (c2) record btrace bts with branchstub --btrace-source=lbr
	e2e_gdb btrace /e2e/btrace.cmds "$E2E_BRANCHES"
	L=/tmp/btrace.log
	grep -q 'Breakpoint 2, trace_end' $L || fail "(c2) did not reach trace_end"
	grep -E 'Could not enable|does not support branch tracing|Failed to start recording|^Failed' $L &&
		fail "(c2) record btrace bts failed"
	grep -q '^Branch-trace source: lbr (chosen: lbr)' $L || fail "(c2) 'monitor btrace status' does not name lbr"
	grep -q '^Thread [0-9]*: recording' $L || fail "(c2) thread not recording"
	grep -q '^Active record target: record-btrace' $L || fail "(c2) record-btrace not active"
	grep -q '^Recording format: Branch Trace Store' $L || fail "(c2) not BTS format"
	rec=$(grep -E '^Recorded [0-9]+ instructions in [0-9]+ functions' $L)
	echo "$rec" | grep -qE '^Recorded [1-9][0-9]* instructions' || fail "(c2) info record: no recorded instructions"
	# the snapshots reach the trace: the newest recorded branch ends at trace_end's int3
	bp=$(sed -n 's/^Breakpoint 2 at \(0x[0-9a-f]*\): .*/\1/p' $L | head -1)
	last=$(grep '^branch 0x' $L | tail -1)
	echo "$last" | grep -q -- "-> $bp <trace_end+0x[0-9a-f]*>\$" ||
		fail "(c2) newest recorded branch '$last' does not end at trace_end's breakpoint $bp"
	# The synthetic entries (from = to - 0x20, each one 0x10 below the next) never form a valid
	# block (a block runs from one branch's target to the next branch's source, which is lower),
	# so GDB decodes every block as a gap. Real LBR entries would decode.
	echo "$rec" | grep -q "gaps)" && echo "[guest] (c2) note: synthetic entries decode as gaps only (expected with simulate_lbr): $rec"
	grep -q '^\[Inferior 1 (process [0-9]*) killed\]' $L || fail "(c2) kill"

	# (c3) monitor lbr + record btrace on one server
	e2e_gdb shared /e2e/shared.cmds "$E2E_BPLOOP"
	L=/tmp/shared.log
	grep -E 'Could not enable|does not support branch tracing|Failed to start recording|File exists' $L &&
		fail "(c3) record btrace after monitor lbr failed"
	[ "$(grep -c '^LBR armed for thread' $L)" = 2 ] ||
		fail "(c3) expected 'LBR armed' twice (before recording, and again after record stop detached)"
	grep -qE '^Recorded [1-9][0-9]* instructions' $L || fail "(c3) info record: the shared handle's snapshots did not reach the trace"
	grep -qF 'Last 16 branches before this stop (newest last) [SIMULATED LBR: test mode]:' $L ||
		fail "(c3) monitor lbr while recording shows no snapshot"
	a=$(grep -n '^Last 16 branches' $L | head -1 | cut -d: -f1); b=$(grep -n '^LBR armed' $L | tail -1 | cut -d: -f1)
	[ -n "$a" ] && [ -n "$b" ] && [ "$a" -lt "$b" ] || fail "(c3) record stop did not detach the thread"

	umount /host/var/tmp /host/dev /host/sys /host/proc /host
	echo "[guest] (c) end-to-end phase took $(awk -v a=$t0 -v b=$(cut -d' ' -f1 /proc/uptime) 'BEGIN{printf "%.1f", b-a}')s"
}
if [ -f /e2e/conf ]; then e2e; else echo "[guest] (c) end-to-end phase skipped (MSRH_E2E=0)"; fi
rmmod msr_helper || fail "rmmod msr_helper"
[ ! -e /dev/msr_helper ] || fail "/dev/msr_helper still exists after rmmod"
dmesg | grep -q 'msr_helper: unloaded: 0 object(s) outstanding' || fail "leak: objects outstanding at unload"
n=$(wc -l </tmp/dmesg.boot)
if dmesg | tail -n +$((n + 1)) | grep -E 'BUG:|WARNING:|Oops|general protection|Call Trace'; then
	fail "kernel log has BUG/WARNING/Oops"
fi
dmesg | sed -n 's/^\[[ 0-9.]*\] //p' | grep '^msr_helper' | sed 's/^/[guest] dmesg: /'
[ $ok -eq 1 ] && echo "GUEST-RESULT: PASS" || echo "GUEST-RESULT: FAIL"
poweroff -f
INIT
chmod +x "$R/init"
(cd "$R" && find . | cpio -o -H newc --quiet | gzip -1 >"$WORK/initrd.gz") || die "cpio failed"
log "initramfs ready"

# ---- 6. boot once per CPU model ---------------------------------------------------------------
result=0
virtfs=()
[ "$E2E" = 1 ] && virtfs=(-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap)
for cpu in $CPUS; do
	con=$WORK/console-$cpu.log
	log "booting $KVER under TCG, -cpu $cpu"
	timeout "${QEMU_TIMEOUT:-240}" qemu-system-x86_64 -accel tcg -cpu "$cpu" -m 1024 -smp 1 "${virtfs[@]}" \
		-nographic -no-reboot -kernel "$KIMG" -initrd "$WORK/initrd.gz" \
		-append 'console=ttyS0 panic=-1 loglevel=1 quiet' </dev/null 2>&1 |
		tr -d '\r' | sed 's/\x1b\[[0-9;?]*[a-zA-Z]//g' >"$con"
	grep -E '^\[guest\]|^selftest:|^GUEST-RESULT|BUG:|Oops|general protection|Call Trace|Kernel panic' "$con" |
		sed "s/^/  [$cpu] /"
	if grep -q '^GUEST-RESULT: PASS' "$con"; then
		log "-cpu $cpu: PASS"
	else
		log "-cpu $cpu: FAIL (console log: $con)"
		result=1
	fi
done

if [ $result -eq 0 ]; then
	echo "QEMU-SELFTEST: PASS (kernel $KVER, cpus: $CPUS, $(( $(date +%s) - T0 ))s)"
else
	echo "QEMU-SELFTEST: FAIL (kernel $KVER, cpus: $CPUS, $(( $(date +%s) - T0 ))s)"
fi
exit $result
