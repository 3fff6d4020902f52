#!/usr/bin/python3
"""Issue 28's figures: `branchstub record` and `branchstub replay` against native, for the bench
loop (`bploop N`), `ls -l DIR`, `gzip -c FILE` (FILE: --gzip-mib MiB of generated text) and a
loop of --stat-calls stat() calls (`statloop N`, whose row also gives the cost of one recorded
and one replayed system call: (time - native) / N).

    /usr/bin/python3 bench/replay_bench.py --build BUILD [--runs 3] [--sources patch,soft]

native: wall time of the program run to its end (median of --runs). record: wall time of
`branchstub record -o DIR [--btrace-source=S] PROG ARGS` (the program's output to /dev/null).
replay: wall time of `branchstub replay --btrace-source=S` serving a GDB in batch mode that
only `target remote`s and `continue`s to the program's end (GDB's start-up and its
shared-library work included: "gdb native" is that same GDB session over `branchstub PROG`,
no replay, the floor a replay under GDB can reach). Every replay must end with the recorded
exit status and no divergence. soft (the software engine's stop per block) runs a shorter bench
loop (--soft-loop-iters) and, with --soft-programs, ls and gzip (minutes). Not a pass/fail test: it prints a
markdown table.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import free_port  # noqa: E402


def timed(argv, **kw):
    t = time.perf_counter()
    p = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)
    return time.perf_counter() - t, p


def gdb_session(server_argv, prog, timeout):
    """Starts the server on a free port, runs GDB (target remote, continue) to the end: wall
    time of the whole session and GDB's output. Two continues: a replay holds the program once
    at the recorded end (reverse execution may start there); a live run has ended by then."""
    port = free_port()
    srv = subprocess.Popen(server_argv(":%d" % port), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    t = time.perf_counter()
    try:
        while b"Listening on port" not in srv.stderr.readline():  # ready for GDB
            if srv.poll() is not None:
                break
        g = subprocess.run(["gdb", "-nx", "-q", "-batch", "-ex", "set confirm off", "-ex", "target remote :%d" % port,
                            "-ex", "continue", "-ex", "continue", prog], capture_output=True, text=True,
                           timeout=timeout)
        wall = time.perf_counter() - t
    finally:
        srv.kill()
        err = srv.communicate()[1].decode("utf-8", "replace")
    return wall, g.stdout + g.stderr, err


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--loop-iters", type=int, default=200000000)
    ap.add_argument("--soft-loop-iters", type=int, default=200000, help="the bench loop under the soft source")
    ap.add_argument("--gzip-mib", type=int, default=4)
    ap.add_argument("--ls-dir", default="/usr/lib/x86_64-linux-gnu")
    ap.add_argument("--stat-calls", type=int, default=20000)
    ap.add_argument("--syscall-buffer", choices=["on", "off"], default="off",
                    help="branchstub record --syscall-buffer=on|off (non-blocking calls without stops)")
    ap.add_argument("--only", default="", help="rows to run: loop,ls,gzip,stat (default: all)")
    ap.add_argument("--sources", default="patch,soft")
    ap.add_argument("--soft-programs", default="", help="ls,gzip: the soft source runs these too (minutes)")
    ap.add_argument("--timeout", type=int, default=600)
    a = ap.parse_args()
    server = os.path.join(a.build, "server", "branchstub")
    work = tempfile.mkdtemp(prefix="replay_bench.")
    text = os.path.join(work, "input.txt")
    with open(text, "w") as f:
        line = "the quick brown fox %d jumps over the lazy dog, record and replay\n"
        n = 0
        while f.tell() < a.gzip_mib << 20:
            f.write(line % n)
            n += 1
    loop = os.path.join(a.build, "inferiors", "bploop")
    programs = [
        ("loop", "bploop %d" % a.loop_iters, [loop, str(a.loop_iters)]),
        ("soft-loop", "bploop %d" % a.soft_loop_iters, [loop, str(a.soft_loop_iters)]),
        ("ls", "ls -l %s" % a.ls_dir, ["/bin/ls", "-l", a.ls_dir]),
        ("gzip", "gzip -c (%d MiB)" % a.gzip_mib, ["/bin/gzip", "-c", text]),
        ("stat", "statloop %d" % a.stat_calls, [os.path.join(a.build, "inferiors", "statloop"), str(a.stat_calls)]),
    ]
    rows = []
    for key, label, argv in programs:
        if a.only and key not in a.only.split(","):
            continue
        sources = [x for x in a.sources.split(",") if (x == "soft") == (key == "soft-loop" or key in a.soft_programs.split(","))]
        if not sources:
            continue
        native = median([timed(argv)[0] for _ in range(a.runs)])
        gdb_native = median([gdb_session(lambda comm: [server, "--once", comm] + argv, argv[0], a.timeout)[0]
                             for _ in range(a.runs)])
        for source in sources:
            recs, reps, status = [], [], ""
            for i in range(a.runs):
                trace = os.path.join(work, "%s-%s-%d" % (key, source, i))
                t, p = timed([server, "record", "-o", trace, "--btrace-source=" + source,
                              "--syscall-buffer=" + a.syscall_buffer] + argv, timeout=a.timeout)
                if b"trace in" not in p.stderr:
                    status = "record failed: " + p.stderr.decode()[-200:]
                    break
                recs.append(t)
                wall, out, err = gdb_session(
                    lambda comm: [server, "replay", "--once", "--btrace-source=" + source, comm, trace], argv[0], a.timeout)
                if "divergence" in out + err or ("exited normally" not in out and "exited with code" not in out):
                    status = "replay failed: " + (out + err)[-300:]
                    break
                reps.append(wall)
            rows.append((label, source, native, gdb_native, median(recs), median(reps), status))
            print(rows[-1], file=sys.stderr)
    print("| program | counter | native | record | x native | replay under GDB | x native | GDB session without replay |")
    print("|---|---|---|---|---|---|---|---|")
    for label, source, native, gdb_native, rec, rep, status in rows:
        if status:
            print("| %s | %s | %.3f s | %s | | | | |" % (label, source, native, status.replace("|", "/").replace("\n", " ")))
            continue
        print("| %s | %s | %.3f s | %.3f s | %.1fx | %.3f s | %.1fx | %.3f s |" %
              (label, source, native, rec, rec / native, rep, rep / native, gdb_native))
    for label, source, native, gdb_native, rec, rep, status in rows:
        if label.startswith("statloop") and not status:
            print("\n%s (%s): %.1f us a recorded stat(), %.1f us a replayed one (over GDB's session)" %
                  (label, source, (rec - native) / a.stat_calls * 1e6, (rep - gdb_native) / a.stat_calls * 1e6))


if __name__ == "__main__":
    main()
