#!/usr/bin/python3
"""Issue 11's figures: the bench loop region (`bploop N`: from the first `hit` to `loop_done`)
natively, under the software source, under the block-patching source and under GDB's
`record full` over gdbserver.

    /usr/bin/python3 bench/patch_bench.py --build BUILD [--soft-iters 55000] [--patch-iters 2000000] [--runs 3]

native: wall time of `bploop N` minus `bploop 1` (both run to exit, median of --runs; N large
so the loop dominates), per iteration. soft/patch/full: `record btrace` (or `record full` over
Debian's gdbserver, --full-iters iterations: it runs ~3,000 instructions/s) at the first `hit`,
then the `continue` to `loop_done` timed inside GDB (Python perf_counter), per iteration; the
record's instruction count is checked (16 per iteration + a constant) so the work was really
recorded. Not a pass/fail test: it prints a markdown table.

--programs adds whole-program rows for code that runs mostly in shared libraries: `ls -l DIR`
and `gzip -c FILE` (FILE: --gzip-mib MiB of generated text; the software source gets
--soft-gzip-kib KiB, its figure is scaled per byte). native: wall time of the whole run
(process creation and the loader included, which the traced rows do not time, so the ratio
is slightly flattering; the last column takes the wall time of `/usr/bin/true` off native
first, which is harsher than the truth: the program's own loader work stays in native). traced: GDB stops at `__libc_start_main` (the loader and its
shared-library events are done: an untraced GDB session alone takes ~25x native ls to get
through those, with gdbserver as with branchstub), `record btrace`, then the `continue` to a
breakpoint on libc's `_exit` is timed inside GDB (a 1 MiB BTS buffer: GDB's own processing of
a full history is not what is measured). "untraced" is the same session without `record
btrace`: what the debugger itself costs over that region. `record full` over gdbserver is not
run to the end on the programs (millions of instructions at ~2,300/s: hours). With
--full-seconds S it is tried on each program from `__libc_start_main` (GDB 13 stops at the
first AVX/AVX-512 instruction of glibc, which it cannot record), then run for S seconds with
glibc steered to its SSE2 functions (NO_AVX_TUNABLES; a SIGSTOP sent to the program ends
it), and that rate over the region's instruction count (counted by the patch source into a
history that keeps them all; gzip on the small input, scaled) gives an estimated row.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (Server, run_gdb)


def native_per_iter(prog, iters, runs):
    def wall(n):
        t = time.perf_counter()
        subprocess.run([prog, str(n)], check=True)
        return time.perf_counter() - t
    samples = []
    for _ in range(runs):
        samples.append((wall(iters) - wall(1)) / iters)
    return statistics.median(samples)


def traced_per_iter(exe, prog, source, iters, runs):
    out_rates, insns = [], None
    for _ in range(runs):
        if source == "full":
            server = bench.Server("gdbserver", "/usr/bin/gdbserver", prog, [str(iters)])
            record = ["set record full insn-number-max unlimited", "record full"]
        else:
            server = bench.Server(source, exe, prog, [str(iters)], ["--btrace-source=" + source])
            record = ["set record btrace bts buffer-size 268435456", "record btrace"]
        with server as s:
            cmds = ["break hit", "continue", "delete"] + record + ["tbreak loop_done",
                    "python import time; t0 = time.perf_counter()", "continue",
                    "python print('ELAPSED %.6f' % (time.perf_counter() - t0))", "info record"]
            if source != "full":
                cmds.append("monitor btrace status")
            out = bench.run_gdb(s.port, prog, cmds, timeout=1800)
        m = re.search(r"ELAPSED ([0-9.]+)", out)
        n = re.search(r"(?:Recorded|Log contains) (\d+) instructions", out)
        if not m or not n:
            raise SystemExit("%s run failed:\n%s" % (source, out[-3000:]))
        insns = int(n.group(1))
        out_rates.append(float(m.group(1)) / iters)
        status = re.search(r"patch: .*", out)
        if status:
            print("  %s %d: %s" % (source, iters, status.group(0)), file=sys.stderr)
    return statistics.median(out_rates), insns


def traced_program(exe, prog, args, source, runs):
    """Median seconds from __libc_start_main to _exit, the instruction count and the fraction of
    block ends patched (patch source). source "untraced": the same session without a record."""
    times, insns, patched = [], None, None
    for _ in range(runs):
        src = "soft" if source == "untraced" else source
        with bench.Server(source, exe, prog, args, ["--btrace-source=" + src]) as s:
            record = [] if source == "untraced" else ["set record btrace bts buffer-size 1048576", "record btrace"]
            cmds = ["set breakpoint pending on", "break __libc_start_main", "continue", "delete"] + record + [
                    "break _exit", "python import time; t0 = time.perf_counter()", "continue",
                    "python print('ELAPSED %.6f' % (time.perf_counter() - t0))", "info record",
                    "monitor btrace status"]
            out = bench.run_gdb(s.port, prog, cmds, timeout=3600)
        m = re.search(r"ELAPSED ([0-9.]+)", out)
        n = re.search(r"Recorded (\d+) instructions", out)
        if not m or (record and not n) or "_exit" not in out:
            raise SystemExit("%s %s run failed:\n%s" % (source, prog, out[-3000:]))
        insns = int(n.group(1)) if n else 0
        times.append(float(m.group(1)))
        status = re.search(r"patch: (\d+) block ends patched, (\d+) left to stops.*", out)
        if status:
            p, q = int(status.group(1)), int(status.group(2))
            patched = p / max(1, p + q)
            print("  %s %s: %s" % (source, os.path.basename(prog), status.group(0)), file=sys.stderr)
    return statistics.median(times), insns, patched


# GDB 13's `record full` cannot record AVX or AVX-512 instructions ("Process record does not
# support instruction 0x62"), and glibc picks its AVX/EVEX string functions wherever the CPU
# has them: `ls` and `gzip` stop within a few thousand instructions. With these tunables
# glibc takes its SSE2 functions instead, which `record full` can record; the rate measured
# so stands for the rate on the program's own instructions.
NO_AVX_TUNABLES = ("glibc.cpu.hwcaps=-AVX_Fast_Unaligned_Load,-AVX2,-AVX512F,-AVX512BW,-AVX512VL,-AVX,-RTM,"
                   "-ERMS,-FSRM,-BMI2,-LZCNT,-MOVBE")


def full_program_rate(prog, args, seconds, tunables=None):
    """(instructions per second, the instruction it could not record or None) of GDB's `record
    full` over gdbserver on prog from __libc_start_main, over `seconds` of recording (ended by
    a SIGSTOP sent to the program) or until it stops at an instruction it cannot record."""
    saved = os.environ.get("GLIBC_TUNABLES")
    try:
        if tunables:
            os.environ["GLIBC_TUNABLES"] = tunables  # gdbserver passes it to the program
        server = bench.Server("gdbserver", "/usr/bin/gdbserver", prog, args).__enter__()
    finally:
        if saved is None:
            os.environ.pop("GLIBC_TUNABLES", None)
        else:
            os.environ["GLIBC_TUNABLES"] = saved
    try:
        cmds = ["set breakpoint pending on", "break __libc_start_main", "continue", "delete",
                "set record full insn-number-max unlimited", "record full",
                "python import os, signal, threading, time; "
                "tm = threading.Timer(%f, lambda: os.path.exists('/proc/%%d' %% pid) and os.kill(pid, signal.SIGSTOP)); "
                "pid = gdb.selected_inferior().pid; tm.start(); t0 = time.perf_counter()" % seconds,
                "continue", "python print('ELAPSED %.6f' % (time.perf_counter() - t0)); tm.cancel()", "info record"]
        out = bench.run_gdb(server.port, prog, cmds, timeout=seconds + 600)
    finally:
        server.__exit__(None, None, None)
    m = re.search(r"ELAPSED ([0-9.]+)", out)
    n = re.search(r"Log contains (\d+) instructions", out)
    unsupported = re.search(r"Process record does not support instruction (0x[0-9a-f]+) at address (0x[0-9a-f]+)", out)
    if not m or not n or not ("SIGSTOP" in out or unsupported):
        raise SystemExit("record full %s run failed:\n%s" % (prog, out[-3000:]))
    what = "%s at %s after %s instructions" % (unsupported.group(1), unsupported.group(2), n.group(1)) if unsupported else None
    return int(n.group(1)) / float(m.group(1)), what


def region_instructions(exe, prog, args):
    """Every instruction from __libc_start_main to _exit, as the patch source records it into
    a history large enough to keep them all (GDB takes ~6 s per million to count them)."""
    with bench.Server("patch", exe, prog, args, ["--btrace-source=patch"]) as s:
        cmds = ["set breakpoint pending on", "break __libc_start_main", "continue", "delete",
                "set record btrace bts buffer-size 268435456", "record btrace", "break _exit", "continue",
                "info record"]
        out = bench.run_gdb(s.port, prog, cmds, timeout=3600)
    n = re.search(r"Recorded (\d+) instructions", out)
    if not n or "_exit" not in out:
        raise SystemExit("counting %s failed:\n%s" % (prog, out[-3000:]))
    return int(n.group(1))


def text_file(path, size):
    """`size` bytes of generated text lines (what gzip and xz compress here)."""
    with open(path, "w") as f:
        i = 0
        while f.tell() < size:
            f.write("line %d: the quick brown fox %x jumps over %d lazy dogs\n" % (i, i * 2654435761 % 2**32, i % 97))
            i += 1


def native_program(prog, args, runs):
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([prog] + args, check=True, stdout=subprocess.DEVNULL)
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


def program_rows(exe, a):
    import tempfile
    rows = []
    rows.append(("`ls -l %s`" % a.ls_dir, "/usr/bin/ls", ["-l", a.ls_dir], ["-l", a.ls_dir], 1.0))
    tmp = tempfile.mkdtemp()
    big, small = os.path.join(tmp, "big.txt"), os.path.join(tmp, "small.txt")
    text_file(big, a.gzip_mib << 20)
    text_file(small, a.soft_gzip_kib << 10)
    scale = os.path.getsize(big) / os.path.getsize(small)
    rows.append(("`gzip -c` %d MiB" % a.gzip_mib, "/usr/bin/gzip", ["-c", big], ["-c", small], scale))
    print("| program | native | untraced session | software source | patch source | block ends patched "
          "| software vs native | patch vs native | patch vs native less process start |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    start = native_program("/usr/bin/true", [], max(a.runs, 7))  # spawn, exec, loader of a trivial program
    full_rows = []
    for title, prog, args, soft_args, soft_scale in rows:
        native = native_program(prog, args, max(a.runs, 7))
        untraced, _, _ = traced_program(exe, prog, args, "untraced", a.runs)
        patch, patch_insns, patched = traced_program(exe, prog, args, "patch", a.runs)
        soft, soft_insns, _ = traced_program(exe, prog, soft_args, "soft", 1)
        soft *= soft_scale
        note = "" if soft_scale == 1.0 else " (%d KiB, x%.0f)" % (a.soft_gzip_kib, soft_scale)
        print("| %s | %.1f ms | %.1f ms | %.1f s%s | %.1f ms | %.1f%% | %.0fx | %.1fx | %.1fx |" % (
            title, native * 1e3, untraced * 1e3, soft, note, patch * 1e3, 100 * (patched or 0), soft / native,
            patch / native, patch / (native - start)))
        print("  %s: patch recorded %d instructions, software %d" % (title, patch_insns, soft_insns), file=sys.stderr)
        if a.full_seconds:
            _, stopped = full_program_rate(prog, args, a.full_seconds)
            rate, again = full_program_rate(prog, args, a.full_seconds, NO_AVX_TUNABLES)
            insns = region_instructions(exe, prog, soft_args) * soft_scale  # (gzip: the small input, scaled)
            full_rows.append((title, insns, stopped, rate, again, native))
    if full_rows:
        print("\n| program | instructions (`__libc_start_main` to `_exit`; gzip: scaled like the software row) | "
              "`record full` over gdbserver | "
              "its rate with glibc's SSE2 functions (%g s) | estimated whole region | vs native |" % a.full_seconds)
        print("|---|---:|---|---:|---:|---:|")
        for title, insns, stopped, rate, again, native in full_rows:
            print("| %s | %.0f | %s | %.0f instructions/s%s | %.0f s | %.0fx |" % (
                title, insns, "stops: cannot record " + stopped if stopped else "records", rate,
                " (stopped: %s)" % again if again else "", insns / rate, insns / rate / native))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(bench.REPO, "build"))
    ap.add_argument("--soft-iters", type=int, default=55000)
    ap.add_argument("--patch-iters", type=int, default=2000000)
    ap.add_argument("--native-iters", type=int, default=20000000)
    ap.add_argument("--full-iters", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--programs", action="store_true", help="also ls -l and gzip -c (shared-library code)")
    ap.add_argument("--programs-only", action="store_true")
    ap.add_argument("--ls-dir", default="/usr/share/doc")
    ap.add_argument("--gzip-mib", type=int, default=4)
    ap.add_argument("--soft-gzip-kib", type=int, default=64)
    ap.add_argument("--full-seconds", type=float, default=0,
                    help="estimate `record full` on the programs from this many seconds of it")
    a = ap.parse_args()
    exe = os.path.join(a.build, "server", "branchstub")
    prog = os.path.join(a.build, "inferiors", "bploop")
    if a.programs_only:
        program_rows(exe, a)
        return
    native = native_per_iter(prog, a.native_iters, a.runs)
    soft, soft_insns = traced_per_iter(exe, prog, "soft", a.soft_iters, a.runs)
    patch, patch_insns = traced_per_iter(exe, prog, "patch", a.patch_iters, a.runs)
    patch_small, patch_small_insns = traced_per_iter(exe, prog, "patch", a.soft_iters, a.runs)
    full, full_insns = traced_per_iter(exe, prog, "full", a.full_iters, 1)
    assert soft_insns == patch_small_insns, (soft_insns, patch_small_insns)
    print("| run | iterations | instructions recorded | ns / iteration | vs native |")
    print("|---|---:|---:|---:|---:|")
    print("| native | %d | | %.2f | 1x |" % (a.native_iters, native * 1e9))
    print("| software source | %d | %d | %.0f | %.0fx |" % (a.soft_iters, soft_insns, soft * 1e9, soft / native))
    print("| patch source | %d | %d | %.1f | %.1fx |" % (a.soft_iters, patch_small_insns, patch_small * 1e9, patch_small / native))
    print("| patch source | %d | %d | %.1f | %.1fx |" % (a.patch_iters, patch_insns, patch * 1e9, patch / native))
    print("| GDB `record full` over gdbserver | %d | %d | %.0f | %.0fx |" % (a.full_iters, full_insns, full * 1e9, full / native))
    print("\npatch vs software: %.0fx faster per iteration" % (soft / patch))
    if a.programs:
        print()
        program_rows(exe, a)


if __name__ == "__main__":
    main()
