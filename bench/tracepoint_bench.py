#!/usr/bin/python3
"""Tracepoint hits per second (issue 31), side by side in one run:

  branchstub, ftrace    (jump pad: condition and collection run inside the program)
  branchstub, trace     (an int3: a ptrace stop per hit, the server collects)
  gdbserver,  trace     (the same; gdbserver's ftrace needs its agent library loaded into
                         the program, which this row does not do)

The tracepoints inferior calls sample(i, tag) N times; the tracepoint sits on sample()'s first
line (LINE:fast, a 9-byte `lock add`, so ftrace can place its jump), collects the two locals
`i` and `tag`, and has the condition `i % 100 == 0` (true once in 100 hits). The timed part is
the one `continue` from tstart to the stop at done() (a 64 MiB trace buffer keeps every frame);
the proof is tstatus's frame count
(N / 100) and `print hits_seen` (N). Native: the same program run alone (best of 3), so the
table also shows the time per hit on top of native.

    /usr/bin/python3 bench/tracepoint_bench.py [--build DIR] [--runs N] [--hits N] [--stop-hits N]

Not a pass/fail test.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import T0, T1, Server, run_gdb, seconds  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fast_line():
    with open(os.path.join(REPO, "tests", "inferiors", "tracepoints.c")) as f:
        for n, line in enumerate(f, 1):
            if "LINE:fast" in line:
                return n
    raise RuntimeError("no LINE:fast")


def native(prog, hits):
    best = None
    for _ in range(3):
        t = time.perf_counter()
        subprocess.run([prog, str(hits)], check=True, stdout=subprocess.DEVNULL)
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    return best


def one_run(exe, prog, hits, command, timeout):
    with Server(os.path.basename(exe), exe, prog, [str(hits)]) as s:
        out = run_gdb(s.port, prog, [
            "set trace-buffer-size 67108864", "break main", "continue",
            "%s tracepoints.c:%d if i %% 100 == 0" % (command, fast_line()),
            "actions", "collect i, tag", "end", "break done", "tstart", T0, "continue", T1, "tstop", "tstatus",
            "print hits_seen"], timeout)
    frames = re.search(r"Collected (\d+) trace frames", out)
    if not frames or int(frames.group(1)) != hits // 100 or not re.search(r"\$1 = %d\b" % hits, out):
        raise RuntimeError("wrong collection:\n" + out[-3000:])
    return seconds(out)[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--hits", type=int, default=1000000)
    ap.add_argument("--stop-hits", type=int, default=100000, help="hits for the stop-per-hit rows")
    a = ap.parse_args()
    prog = os.path.join(a.build, "inferiors", "tracepoints")
    branchstub = os.path.join(a.build, "server", "branchstub")
    cases = [("branchstub, ftrace (jump pad)", branchstub, a.hits, "ftrace"),
             ("branchstub, trace (a stop per hit)", branchstub, a.stop_hits, "trace"),
             ("gdbserver, trace (a stop per hit)", "/usr/bin/gdbserver", a.stop_hits, "trace")]
    times = {name: [] for name, *_ in cases}
    for _ in range(a.runs):
        for name, exe, hits, command in cases:
            times[name].append(one_run(exe, prog, hits, command, timeout=3600))
    print("| tracepoint, 2 locals collected, condition true once in 100 hits | hits | s (median of %d) |"
          " hits/s | µs per hit over native |" % a.runs)
    print("|---|---:|---:|---:|---:|")
    for name, exe, hits, command in cases:
        t = statistics.median(times[name])
        base = native(prog, hits)
        print("| %s | %d | %.3f | %.0f | %.2f |" % (name, hits, t, hits / t, (t - base) / hits * 1e6))
    print("| native (the program alone) | %d | %.3f | | |" % (a.hits, native(prog, a.hits)))


if __name__ == "__main__":
    main()
