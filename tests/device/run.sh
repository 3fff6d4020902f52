#!/usr/bin/env bash
# On a bare x86-64 machine, as root, from the repository root, with .dev/ made by make-bundle.sh:
# the probe (on the machine's own libc and in the chroot), the unit tests and the integration
# tests (Debian 12's gdb 13.1 in a chroot on the machine's kernel and CPU), and the threaded
# benchmark against gdbserver. Logs go to $OUT (default /tmp/out).
#   ITIME (integration limit, s; 330), PYK (pytest -k expression), PYN (pytest-xdist workers; 1),
#   BTIME (benchmark limit, s; 90), WTIME (whole-run bench limit, s; 0 = skipped), WROWS (its rows; xz,gzip),
#   RTIME (record/replay bench limit, s; 0 = skipped), RROWS (its rows; ls,gzip,stat)
REPO=$PWD; R=/tmp/droot; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
mkdir -p $R/usr/lib $R/usr/bin $R/usr/sbin $R/usr/lib64
for d in lib bin sbin lib64; do ln -sfn usr/$d $R/$d; done
(cd $R && xz -dc "$REPO/.dev/rootfs.tar.xz" | tar xf -)
mkdir -p $R/work/main $R/proc $R/sys $R/dev $R/tmp $R/root $R/run
mount --bind "$REPO" $R/work/main
# The inferiors must look newer than their sources, or the tests compile them again (no gcc here).
mkdir -p "$REPO/build-new" && (cd "$REPO/build-new" && xz -dc "$REPO/.dev/build.tar.xz" | tar xf - && find . -type f -exec touch {} +)
mount -t proc proc $R/proc; mount --rbind /sys $R/sys; mount --rbind /dev $R/dev; chmod 1777 $R/tmp
mkdir -p /tmp/dlibs && cp $R/usr/lib/x86_64-linux-gnu/libcapstone.so.4 $R/usr/lib/x86_64-linux-gnu/libfmt.so.9 /tmp/dlibs/
echo "== host"; uname -a; grep -m1 "model name" /proc/cpuinfo; nproc; head -1 /etc/os-release; ldd --version | head -1
echo "== probe, the machine's libc"; LD_LIBRARY_PATH=/tmp/dlibs "$REPO/build-new/server/branchstub" --probe
CH="chroot $R /usr/bin/env -i PATH=/usr/bin:/bin:/usr/sbin:/sbin HOME=/root LANG=C.UTF-8 BRANCHSTUB_BUILD=/work/main/build-new PYTHONUNBUFFERED=1"
echo "== probe, chroot"; $CH /work/main/build-new/server/branchstub --probe
for u in unit_protocol unit_backend unit_server; do   # side by side: they share nothing
  $CH timeout 200 /work/main/build-new/tests/$u > "$OUT/$u.txt" 2>&1 &
done; wait
for u in unit_protocol unit_backend unit_server; do echo "== $u"; tail -3 "$OUT/$u.txt"; done
echo "== integration"
$CH bash -c "cd /work/main && timeout ${ITIME:-330} python3 -m pytest -q -p no:cacheprovider --tb=short -rfEs tests/integration -n ${PYN:-1} ${PYK:--k 'not lldb and not dap and not cdt and not native_gdb and not patch_fuzz'}" > "$OUT/integration.txt" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/integration.txt" | tail -40
echo "== threaded benchmark"
$CH bash -c "cd /work/main && timeout ${BTIME:-90} python3 bench/bench.py --build /work/main/build-new --runs 3 --only '200 threads' --out /tmp/bench.md" 2>&1 | tail -12
if [ "${WTIME:-0}" -gt 0 ]; then
  echo "== whole-run bench (issue 30: rows ${WROWS:-xz,gzip})"
  $CH bash -c "cd /work/main && timeout $WTIME python3 bench/whole_run_bench.py --build /work/main/build-new --runs 2 --native-runs 3 --rows ${WROWS:-xz,gzip}" > "$OUT/whole_run.txt" 2>&1
  tail -12 "$OUT/whole_run.txt"
fi
if [ "${RTIME:-0}" -gt 0 ]; then
  for buf in off on; do
    echo "== record/replay bench (issue 28: rows ${RROWS:-ls,gzip,stat}, system-call buffer $buf)"
    $CH bash -c "cd /work/main && timeout $RTIME python3 bench/replay_bench.py --build /work/main/build-new --runs 3 --sources patch --only ${RROWS:-ls,gzip,stat} --syscall-buffer $buf" > "$OUT/replay_$buf.txt" 2>&1
    tail -8 "$OUT/replay_$buf.txt"
  done
fi
