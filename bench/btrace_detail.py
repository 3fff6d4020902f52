#!/usr/bin/python3
"""Issue 3's figures around the btrace row of bench.py (run that row for the rates).

    /usr/bin/python3 bench/btrace_detail.py --build BUILD [--iters 55000] [--stops-iters 5000]
                                            [--ring-iters 400000] [--runs 3]

1. single-step ceiling: bench/singlestep_rate.c (built here with cc -O2) forks
   `bploop ITERS` under ptrace and PTRACE_SINGLESTEPs it from exec to exit: steps/s is the
   most a server that single-steps inside itself can trace per second (no bookkeeping at all).
2. ptrace stops per control-flow instruction: a `record btrace` of the bploop region (first
   `hit` to `return 0`) with `strace -f -p <branchstub>` attached for the `continue` only;
   resume requests (PTRACE_CONT/SINGLESTEP/SYSCALL/...) are counted from strace's log, and the
   control-flow instructions executed in the region are counted independently from GDB's
   record (gdb.current_recording().instruction_history: every instruction whose mnemonic is a
   jump/call/ret/loop/syscall, and the taken ones: next pc != pc + size).
3. server memory with a 64 MiB ring: VmRSS before `record btrace`, then VmRSS/VmHWM after a
   recorded `continue` over `bploop RING_ITERS` (long enough to fill the ring).
"""

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def singlestep(build, iters, runs):
    exe = os.path.join(tempfile.gettempdir(), "bs-singlestep-rate")
    subprocess.run(["cc", "-O2", "-o", exe, os.path.join(HERE, "singlestep_rate.c")], check=True)
    prog = os.path.join(build, "inferiors", "bploop")
    rates, steps = [], None
    for r in range(runs):
        out = subprocess.run([exe, prog, str(iters)], stdout=subprocess.PIPE, check=True).stdout.decode()
        m = re.search(r"steps=(\d+) seconds=([0-9.]+) steps_per_s=(\d+) exit=(\d+)", out)
        if not m or m.group(4) != "0":
            raise RuntimeError("singlestep_rate: " + out)
        steps = int(m.group(1))
        rates.append(int(m.group(3)))
        print("  single-step run %d: %d steps in %s s = %s steps/s" % (r + 1, steps, m.group(2), m.group(3)), flush=True)
    return steps, statistics.median(rates)


COUNT_FLOWS = r"""python
import re as _re
_hist = gdb.current_recording().instruction_history
_flow = _re.compile(r"^\s*(j[a-z]+|call[a-z]*|ret[a-z]*|loop[a-z]*|syscall|sysenter|int|int3|iret[a-z]*|hlt)\b")
_n = _cf = _taken = 0
_prev = None
for _i in _hist:
    _n += 1
    if _prev is not None and _i.pc != _prev.pc + _prev.size:
        _taken += 1
    _d = _i.decoded
    if isinstance(_d, bytes):
        _d = _d.decode("utf-8", "replace")
    _m = _flow.match(_d.split("\t")[-1])
    if _m:
        _cf += 1
    _prev = _i
print("FLOWS insns=%d control_flow=%d taken=%d" % (_n, _cf, _taken))
end"""


def stops(build, iters):
    prog = os.path.join(build, "inferiors", "bploop")
    ret = bench.source_line(os.path.join(bench.REPO, "tests", "inferiors", "bploop.c"), "return 0;")
    log = os.path.join(tempfile.gettempdir(), "bs-strace-%d.log" % os.getpid())
    exe = os.path.join(build, "server", "branchstub")
    with bench.Server("branchstub", exe, prog, [str(iters)]) as srv:
        start = ("python import subprocess, time; __st = subprocess.Popen(['strace', '-f', '-qq', "
                 "'-e', 'trace=ptrace', '-o', %r, '-p', '%d'], stderr=subprocess.DEVNULL); "
                 "time.sleep(1.0)" % (log, srv.proc.pid))
        stop = "python import signal; __st.send_signal(signal.SIGINT); __st.wait()"
        cmds = ["break hit", "continue", "delete", "tbreak bploop.c:%d" % ret,
                "set record btrace bts buffer-size 268435456", "record btrace",
                start, bench.T0, "continue", bench.T1, stop, "info record", COUNT_FLOWS]
        out = bench.run_gdb(srv.port, prog, cmds, 1800)
    m = re.search(r"FLOWS insns=(\d+) control_flow=(\d+) taken=(\d+)", out)
    if not m:
        raise RuntimeError("no FLOWS line:\n" + out[-3000:])
    insns, cf, taken = map(int, m.groups())
    req = {}
    with open(log) as f:
        for line in f:
            r = re.search(r"ptrace\((PTRACE_[A-Z_]+)", line)
            if r:
                req[r.group(1)] = req.get(r.group(1), 0) + 1
    os.unlink(log)
    resumes = sum(v for k, v in req.items() if k in ("PTRACE_CONT", "PTRACE_SINGLESTEP", "PTRACE_SYSCALL",
                                                     "PTRACE_SYSEMU", "PTRACE_SYSEMU_SINGLESTEP", "PTRACE_LISTEN"))
    print("  region: %d instructions, %d control-flow instructions, %d taken branches" % (insns, cf, taken))
    print("  ptrace requests during the continue: %s" % ", ".join("%s=%d" % kv for kv in sorted(req.items())))
    print("  resumes (= stops) per control-flow instruction: %.3f; per taken branch: %.3f"
          % (resumes / cf, resumes / taken), flush=True)
    return dict(insns=insns, cf=cf, taken=taken, resumes=resumes, req=req, secs=bench.seconds(out))


def vm(pid):
    with open("/proc/%d/status" % pid) as f:
        s = f.read()
    return {k: int(re.search(r"^%s:\s+(\d+) kB" % k, s, re.M).group(1)) for k in ("VmRSS", "VmHWM")}


def memory(build, iters):
    prog = os.path.join(build, "inferiors", "bploop")
    exe = os.path.join(build, "server", "branchstub")
    ret = bench.source_line(os.path.join(bench.REPO, "tests", "inferiors", "bploop.c"), "return 0;")
    with bench.Server("branchstub", exe, prog, [str(iters)]) as srv:
        pid = srv.proc.pid
        read = ("python print('VM %%s' %% ' '.join(l.split()[0] + l.split()[1] for l in "
                "open('/proc/%d/status') if l.startswith(('VmRSS', 'VmHWM'))))" % pid)
        cmds = ["break main", "continue", read, "tbreak bploop.c:%d" % ret,
                "set record btrace bts buffer-size 67108864", "record btrace", read,
                "continue", read, "info record"]
        out = bench.run_gdb(srv.port, prog, cmds, 3600)
    vms = re.findall(r"VM VmHWM:(\d+) VmRSS:(\d+)|VM VmRSS:(\d+) VmHWM:(\d+)", out)
    rows = []
    for a, b, c, d in vms:
        rows.append((int(b or c), int(a or d)))  # (RSS, HWM) in kB
    m = re.search(r"(?:Recorded|Log contains) (\d+) instructions", out)
    if len(rows) != 3 or not m:
        raise RuntimeError("memory run: no figures:\n" + out[-3000:])
    print("  RSS/HWM kB: at main %s, after record btrace %s, after the run %s; %s instructions in the record"
          % (rows[0], rows[1], rows[2], m.group(1)), flush=True)
    return rows, int(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(bench.REPO, "build"))
    ap.add_argument("--iters", type=int, default=55000)
    ap.add_argument("--stops-iters", type=int, default=5000)
    ap.add_argument("--ring-iters", type=int, default=400000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--skip", default="", help="comma-separated: singlestep,stops,memory")
    a = ap.parse_args()
    skip = set(a.skip.split(","))
    if "singlestep" not in skip:
        print("single-step ceiling, bploop %d, exec to exit:" % a.iters)
        steps, rate = singlestep(a.build, a.iters, a.runs)
        print("SINGLESTEP_MEDIAN %d steps/s (%d steps)" % (rate, steps))
    if "stops" not in skip:
        print("ptrace stops per control-flow instruction, bploop %d region:" % a.stops_iters)
        stops(a.build, a.stops_iters)
    if "memory" not in skip:
        print("server memory, 64 MiB ring, bploop %d:" % a.ring_iters)
        memory(a.build, a.ring_iters)


if __name__ == "__main__":
    main()
