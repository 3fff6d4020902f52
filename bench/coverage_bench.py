#!/usr/bin/python3
"""Issue 13's figures: block coverage of `ls -l` of a large directory, start to exit, beside a
plain `record btrace` of the same run (both use the software branch source today).

    /usr/bin/python3 bench/coverage_bench.py --build BUILD [--files 2000] [--runs 3]

For each run, interleaved:
  native     ls -l DIR with its output to /dev/null (wall time of the process)
  coverage   branchstub --coverage OUT.drcov ls -l DIR (wall time, start to exit, file written;
             proof: the drcov file parses and holds blocks of ls and libc)
  btrace     branchstub --once :PORT ls -l DIR with GDB: `record btrace` at the first
             instruction, then `continue` to the exit (the continue timed inside GDB;
             proof: the exit is reported)
Medians are printed as a markdown table. Not a pass/fail test.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "integration"))
import bench  # noqa: E402
import coverage_formats  # noqa: E402

LS = shutil.which("ls") or "/bin/ls"
GDB = shutil.which("gdb") or "/usr/bin/gdb"


def make_dir(files):
    d = tempfile.mkdtemp(prefix="bs-cov-bench-")
    for i in range(files):
        with open(os.path.join(d, "file-%05d.txt" % i), "w") as f:
            f.write("x" * (i % 97))
    return d


def native(d):
    t = time.perf_counter()
    subprocess.run([LS, "-l", d], stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def coverage(build, d, out):
    server = os.path.join(build, "server", "branchstub")
    t = time.perf_counter()
    r = subprocess.run([server, "--coverage", out, LS, "-l", d], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, check=True)
    elapsed = time.perf_counter() - t
    parsed = coverage_formats.parse_drcov(open(out, "rb").read())
    paths = {parsed["modules"][m]["path"] for _, _, m in parsed["bbs"]}
    if not any(p.endswith("/ls") for p in paths) or not any("libc.so" in p for p in paths):
        raise RuntimeError("coverage proof failed: %s" % r.stderr.decode()[-500:])
    return elapsed, len(parsed["bbs"])


def btrace(build, d):
    server = os.path.join(build, "server", "branchstub")
    script = (
        "import gdb, time\n"
        "gdb.execute('record btrace')\n"
        "t = time.perf_counter()\n"
        "gdb.execute('continue')\n"
        "print('ELAPSED %f' % (time.perf_counter() - t))\n")
    with bench.Server("branchstub", server, LS, ["-l", d]) as srv:
        fd, path = tempfile.mkstemp(suffix=".py")
        with os.fdopen(fd, "w") as f:
            f.write(script)
        try:
            out = subprocess.run([GDB, "-nx", "-batch", "-ex", "set confirm off", "-ex", "set sysroot /",
                                  "-ex", "target remote :%d" % srv.port, "-x", path], capture_output=True,
                                 text=True, timeout=3600).stdout
        finally:
            os.unlink(path)
    if "exited normally" not in out:
        raise RuntimeError("btrace proof failed: " + out[-800:])
    return float(out.split("ELAPSED ")[1].split()[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(os.path.dirname(HERE), "build"))
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    d = make_dir(a.files)
    out = os.path.join(d, "..", os.path.basename(d) + ".drcov")
    try:
        n, c, b, blocks = [], [], [], 0
        for r in range(a.runs):
            n.append(native(d))
            secs, blocks = coverage(a.build, d, out)
            c.append(secs)
            b.append(btrace(a.build, d))
            print("  run %d: native %.4f s, coverage %.3f s, record btrace %.3f s" % (r + 1, n[-1], c[-1], b[-1]),
                  flush=True)
        nm, cm, bm = statistics.median(n), statistics.median(c), statistics.median(b)
        print()
        print("`ls -l` of %d files, start to exit, median of %d runs (%d distinct blocks):" % (a.files, a.runs, blocks))
        print()
        print("| run | wall time | vs native |")
        print("|---|---:|---:|")
        print("| native | %.4f s | 1x |" % nm)
        print("| `branchstub --coverage` (software source) | %.3f s | %.0fx |" % (cm, cm / nm))
        print("| `record btrace` + `continue` under GDB (software source) | %.3f s | %.0fx |" % (bm, bm / nm))
    finally:
        shutil.rmtree(d, ignore_errors=True)
        if os.path.exists(out):
            os.unlink(out)


if __name__ == "__main__":
    main()
