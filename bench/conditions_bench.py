#!/usr/bin/python3
"""Conditional breakpoint hits per second (issue 17), side by side in one run:

  branchstub, condition evaluated in the server   (set breakpoint condition-evaluation target)
  gdbserver,  condition evaluated in the server   (same GDB commands)
  branchstub, condition evaluated by GDB          (set breakpoint condition-evaluation host)

bploop calls hit(i) in a loop; `break hit if i == N-1` is true once in N hits (N = 100,000 for
the target-side runs; the host-side run does fewer hits, its rate is per hit all the same).
The timed part is one `continue` from the first hit to the stop at i == N-1; the proof is
GDB's `print i` there. Runs are interleaved and the medians reported.

    /usr/bin/python3 bench/conditions_bench.py [--build DIR] [--runs N] [--hits N] [--host-hits N]

Not a pass/fail test.
"""
import argparse
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import GDB, T0, T1, Server, run_gdb, seconds  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def one_run(exe, prog, hits, evaluation, timeout):
    # hit(0) stops first (the condition is not set yet); from there `hits` more hits, the last
    # (i == hits) true.
    with Server(os.path.basename(exe), exe, prog, [str(hits + 1)]) as s:
        out = run_gdb(s.port, prog, [
            "break hit", "continue", "set breakpoint condition-evaluation " + evaluation,
            "condition 1 i == %d" % hits, T0, "continue", T1, "print i", "info breakpoints"], timeout)
    if not re.search(r"\$1 = %d\b" % hits, out):
        raise RuntimeError("did not stop at i == %d:\n%s" % (hits, out[-2000:]))
    if ("(target evals)" in out) != (evaluation == "target"):
        raise RuntimeError("GDB did not evaluate on the %s:\n%s" % (evaluation, out[-2000:]))
    return hits / seconds(out)[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--hits", type=int, default=100000)
    ap.add_argument("--host-hits", type=int, default=10000)
    a = ap.parse_args()
    prog = os.path.join(a.build, "inferiors", "bploop")
    branchstub = os.path.join(a.build, "server", "branchstub")
    gdbserver = "/usr/bin/gdbserver"
    cases = [("branchstub, target-side", branchstub, a.hits, "target"),
             ("gdbserver, target-side", gdbserver, a.hits, "target"),
             ("branchstub, host-side (GDB evaluates)", branchstub, a.host_hits, "host")]
    rates = {name: [] for name, *_ in cases}
    for _ in range(a.runs):
        for name, exe, hits, evaluation in cases:
            rates[name].append(one_run(exe, prog, hits, evaluation, timeout=1800))
    print("| conditional breakpoint, true once in %d hits | hits/s (median of %d) | runs |" % (a.hits, a.runs))
    print("|---|---:|---|")
    med = {}
    for name, *_ in cases:
        med[name] = statistics.median(rates[name])
        print("| %s | %.0f | %s |" % (name, med[name], " ".join("%.0f" % r for r in rates[name])))
    b, g, h = (med[c[0]] for c in cases)
    print("\nbranchstub/gdbserver %.2fx, target/host %.1fx" % (b / g, b / h))


if __name__ == "__main__":
    main()
