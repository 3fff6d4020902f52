#!/bin/bash
# msr_helper end-to-end test in a throw-away QEMU (TCG) guest running Debian 12's own kernel.
#
# What it does (as root, on a Debian 12 machine with apt access; no KVM needed):
#   1. installs what is missing: linux-headers-amd64 qemu-system-x86 busybox-static cpio,
#      gcc g++ make catch2
#   2. pins KVER from linux-headers-amd64's Depends, so headers and kernel image always match
#   3. `apt-get download`s linux-image-$KVER (no install) and extracts vmlinuz into the work dir
#      (cached there between runs)
#   4. builds msr_helper.ko (in a copy under the work dir) and the static self-test
#   5. builds a busybox initramfs and boots it once per CPU model in $MSRH_QEMU_CPUS; the guest:
#      (a) insmod msr_helper.ko            -> must fail with ENODEV, log why, leave no /dev node
#      (b) insmod msr_helper.ko simulate_lbr=1 -> selftest (attach, int3/step snapshots,
#          permissions, lifetime), rmmod -> "0 object(s) outstanding", dmesg clean
#   6. prints the guest's relevant console lines and a final line; exit 0 = PASS, 1 = FAIL
#
# Environment:
#   MSRH_WORKDIR    work/cache dir (default: build-kmod/ at the repository root)
#   MSRH_QEMU_CPUS  CPU models to boot (default: "max Skylake-Client-v4")
#   QEMU_TIMEOUT    seconds per boot (default 240)
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

# ---- 2. kernel ABI from the headers meta package ------------------------------------------------
KVER=$(dpkg -s linux-headers-amd64 | sed -n 's/^Depends:.*linux-headers-\([0-9][^ ,]*-amd64\).*/\1/p')
[ -n "$KVER" ] || die "cannot read the kernel ABI from linux-headers-amd64's Depends"
KDIR=/lib/modules/$KVER/build
[ -d "$KDIR" ] || die "$KDIR missing (linux-headers-$KVER not installed?)"
log "kernel headers $KVER"

# ---- 3. matching kernel image (download + extract, no install) --------------------------------
KIMG=$WORK/vmlinuz-$KVER
if [ ! -s "$KIMG" ]; then
	rm -rf "$WORK/dl" && mkdir -p "$WORK/dl"
	(cd "$WORK/dl" && apt-get download -qq "linux-image-$KVER") >/dev/null 2>&1 ||
		{ apt-get update -qq >/dev/null; (cd "$WORK/dl" && apt-get download -qq "linux-image-$KVER"); } ||
		die "apt-get download linux-image-$KVER failed"
	deb=$(ls "$WORK"/dl/linux-image-"$KVER"_*.deb 2>/dev/null | head -1)
	[ -n "$deb" ] || die "downloaded package not found"
	dpkg-deb --fsys-tarfile "$deb" | tar -xO "./boot/vmlinuz-$KVER" >"$KIMG.tmp" && mv "$KIMG.tmp" "$KIMG" ||
		die "cannot extract vmlinuz-$KVER"
	rm -rf "$WORK/dl"
fi
log "kernel image $KIMG"

# ---- 4. build the module (in a copy: no build products in the source tree) and the self-test --
B=$WORK/mod
rm -rf "$B" && mkdir -p "$B/include/uapi" "$B/tests"
cp "$MODSRC/msr_helper.c" "$MODSRC/Kbuild" "$B/" &&
	cp "$MODSRC/include/uapi/msr_helper.h" "$B/include/uapi/" &&
	cp "$MODSRC/tests/selftest.c" "$B/tests/" || die "cannot copy the sources"
make -s -C "$KDIR" M="$B" modules >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; die "module build failed"; }
grep -E 'warning|error' "$WORK/build.log" | grep -v 'Skipping BTF' && die "module build has warnings"
gcc -O2 -Wall -Wextra -Werror -static -o "$B/selftest" "$B/tests/selftest.c" || die "selftest build failed"
# the backend's C++ client (backend/btrace/lbr_source.cc) and its unit test, run in the guest too
g++ -std=c++20 -O0 -static -I"$ROOT" -o "$B/test_lbr_source" "$ROOT/tests/unit/catch_main.cc" \
	"$ROOT/tests/unit/backend/test_lbr_source.cc" "$ROOT/backend/btrace/lbr_source.cc" ||
	die "test_lbr_source build failed"
log "built msr_helper.ko, selftest and test_lbr_source"

# ---- 5. initramfs ---------------------------------------------------------------------------
R=$WORK/initramfs
rm -rf "$R" && mkdir -p "$R"/{bin,proc,sys,dev,tmp}
cp /bin/busybox "$R/bin/" && cp "$B/msr_helper.ko" "$B/selftest" "$B/test_lbr_source" "$R/" ||
	die "cannot fill initramfs"
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
for cpu in $CPUS; do
	con=$WORK/console-$cpu.log
	log "booting $KVER under TCG, -cpu $cpu"
	timeout "${QEMU_TIMEOUT:-240}" qemu-system-x86_64 -accel tcg -cpu "$cpu" -m 512 -smp 1 \
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
