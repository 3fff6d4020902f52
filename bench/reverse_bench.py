#!/usr/bin/python3
"""Issue 28's reverse-execution figures: `reverse-continue` to a watchpoint written N
instructions back, on a replay served by branchstub, against the program run natively.

    /usr/bin/python3 bench/reverse_bench.py --build BUILD [--instructions 1000000] [--runs 3]
                                            [--watchpoints auto|hardware|software|steps]

The program (written and compiled here) writes a global once, then runs a loop of 7
instructions an iteration that does not touch it, then calls done(). It is recorded
(`branchstub record`); GDB then replays it to done(), sets `watch target`, and
`reverse-continue` is timed inside GDB (Python perf_counter): the replay goes back over the
whole loop to the write. Also printed: the record's wall time, the forward replay to done()
(GDB's session less its start-up), and native. A 10^8-instruction row is printed only with
--instructions 100000000 (at the software engine's speed it takes minutes); otherwise it is
estimated from the measured rate and marked so. Not a pass/fail test: it prints a markdown
table (docs/benchmarks.md, docs/record-replay.md).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

PROGRAM = r"""
#include <stdlib.h>
long target;
long neighbour;                      /* on target's page */
__attribute__((noinline)) void done(void) { __asm__ volatile("" ::: "memory"); }
int main(int argc, char** argv) {
  long n = argc > 1 ? atol(argv[1]) : 1;
  target = 42;                       /* the write reverse-continue goes back to */
  long acc = 0;
  if (argc > 2)                      /* --page-writes: every iteration writes the watched page */
    for (long i = 0; i < n; i++)
      { acc += i ^ (acc >> 3); *(volatile long*)&neighbour = acc; __asm__ volatile("" : "+r"(acc)); }
  else
    for (long i = 0; i < n; i++)     /* 7 instructions an iteration (gcc 12 -O1) */
      { acc += i ^ (acc >> 3); __asm__ volatile("" : "+r"(acc)); }
  done();
  return (int)(acc & 1);
}
"""

INSNS_PER_ITER = 7  # mov, sar, xor, add, add, cmp, jne (gcc 12 -O1)


def run(argv, **kw):
    t = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, **kw)
    return time.perf_counter() - t, p


def gdb_session(server, trace, prog, timed, watchpoints="auto"):
    script = [
        "set pagination off", "set confirm off", "set sysroot /",
        "target remote | %s replay --watchpoints=%s - %s" % (server, watchpoints, trace),
        "break done", "continue",
        "python import time",
        "python t0 = time.perf_counter()",
    ]
    if timed:
        script += ["watch target", "python t0 = time.perf_counter()", "reverse-continue",
                   "python print('REVERSE_SECONDS %.6f' % (time.perf_counter() - t0))", "print target"]
    script += ["kill"]
    args = ["gdb", "-nx", "-batch", "-q"]
    for c in script:
        args += ["-ex", c]
    return run(args + [prog], timeout=3600)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--instructions", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--page-writes", action="store_true",
                    help="the loop writes a neighbour of the watched global (its page) every iteration: "
                         "the cost of each write where the page is protected")
    ap.add_argument("--watchpoints", default="auto", choices=["auto", "hardware", "software", "steps"],
                    help="the replay's --watchpoints (software: emulated, by page protection in a replay; "
                         "steps: emulated by checked steps only)")
    a = ap.parse_args()
    server = os.path.abspath(os.path.join(a.build, "server", "branchstub"))
    work = tempfile.mkdtemp(prefix="bs-reverse-bench-")
    src, prog = os.path.join(work, "loop.c"), os.path.join(work, "loop")
    with open(src, "w") as f:
        f.write(PROGRAM)
    subprocess.run(["gcc", "-O1", "-g", "-o", prog, src], check=True)
    iters = max(1, a.instructions // INSNS_PER_ITER)

    argv = [prog, str(iters)] + (["page-writes"] if a.page_writes else [])
    native = statistics.median(run(argv)[0] for _ in range(a.runs))
    rec_times, fwd_times, rev_times = [], [], []
    for i in range(a.runs):
        trace = os.path.join(work, "t%d" % i)
        t, p = run([server, "record", "-o", trace] + argv, timeout=3600)
        if b"trace in" not in p.stderr:
            sys.exit("record failed: " + p.stderr.decode())
        rec_times.append(t)
        t_fwd, _ = gdb_session(server, trace, prog, timed=False, watchpoints=a.watchpoints)
        fwd_times.append(t_fwd)
        _, p = gdb_session(server, trace, prog, timed=True, watchpoints=a.watchpoints)
        out = p.stdout.decode() + p.stderr.decode()
        m = re.search(r"REVERSE_SECONDS ([0-9.]+)", out)
        if not m or "Old value = 42" not in out or "New value = 0" not in out:
            sys.exit("reverse-continue did not reach the write:\n" + out[-2000:])
        rev_times.append(float(m.group(1)))
    rec, fwd, rev = (statistics.median(x) for x in (rec_times, fwd_times, rev_times))
    if a.page_writes:
        print("| writes to the watched page back | native run | record | reverse-continue to the write | a write |")
        print("|---:|---:|---:|---:|---:|")
        print("| %s | %.3f s | %.2f s | **%.2f s** | %.1f µs |" % (f"{iters:,}", native, rec, rev, rev / iters * 1e6))
        print("\n(%d runs, medians; %s; --watchpoints=%s)" % (a.runs, os.uname().machine, a.watchpoints))
        return
    n = iters * INSNS_PER_ITER
    print("| instructions back | native run | record | replay to done() (GDB session) | reverse-continue to the write |")
    print("|---:|---:|---:|---:|---:|")
    print("| %s | %.3f s | %.2f s (%.0f×) | %.2f s | **%.2f s** |" % (f"{n:,}", native, rec, rec / native, fwd, rev))
    if n < 100_000_000:
        rate = n / rev
        print("| 100,000,000 | | | | ≈ %.0f s (estimated from %s instructions/s) |" % (1e8 / rate, f"{rate:,.0f}"))
    print("\n(%d runs, medians; %s; --watchpoints=%s)" % (a.runs, os.uname().machine, a.watchpoints))


if __name__ == "__main__":
    main()
