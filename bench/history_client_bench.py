#!/usr/bin/python3
"""Issue 30: what a long branch history costs GDB itself, by `record btrace` buffer size.

    /usr/bin/python3 bench/history_client_bench.py --build BUILD [--sizes 64K,1M,4M,16M] [--runs 1] [--synth]
    /usr/bin/python3 bench/history_client_bench.py --build BUILD --pt [--loop 100000] [--aux-size 1M]

`gzip -c` of 4 MiB of text (38 M taken branches, far more than any buffer here keeps) is
recorded through block patching from `__libc_start_main` to the `exit_group` catchpoint with
each buffer size (`set record btrace bts buffer-size`). Then GDB's commands over the history
the buffer kept are timed inside GDB (Python perf_counter around `gdb.execute`):
  info record        the first read of the history (qXfer:btrace:read) and GDB's decoding of it:
                     for the BTS format GDB disassembles every instruction of every block
  call history       `record function-call-history` (its last page), on the decoded history
  insn history       `record instruction-history` (its last page)
  reverse-stepi      the first step back (GDB enters replay)
  goto begin         `record goto begin` (to the oldest instruction kept)
and the server's share: the seconds GDB waited for the history's packets are not separated
(the server answers a 16 MiB history in well under a second; see docs/btrace.md). Not a
pass/fail test: a markdown table for docs/btrace.md ("How long a history stays interactive").

--synth: each buffer size twice, as BTS and as the PT stream the server writes from the same
software history (--synthesize-pt, backend/btrace/pt_synth.h; the PT buffer sized to keep as
many branches: a twelfth of the BTS size, which counts 24 bytes a branch).

--pt: the same whole run of the bench loop (`bploop N`, from the loader's first instruction to
exit_group) given to GDB twice: in the BTS format (block patching, 1 GiB buffer) and in the PT
format (the Intel PT stream a CPU would have written for it: every executed pc from a
single-stepped run, bench/singlestep_pcs.c, encoded with libipt by tests/tools/pt_tool and
served by the TEST ONLY build's --test-pt-aux). GDB decodes PT with libipt's instruction
decoder instead of its own disassembler: do software histories want to be served as PT?
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
from patch_bench import text_file  # noqa: E402

COMMANDS = [("info record", "info record"),
            ("call history", "record function-call-history"),
            ("insn history", "record instruction-history"),
            ("reverse-stepi", "reverse-stepi"),
            ("goto begin", "record goto begin")]


def size_bytes(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def timed(commands):
    cmds = ["python import time"]
    for key, cmd in commands:
        cmds.append("python t0 = time.perf_counter(); out = gdb.execute(%r, to_string=True); "
                    "print('TIME %s %%.3f' %% (time.perf_counter() - t0)); print(out[:400])" % (cmd, key))
    return cmds


def session(exe, prog, args, size, start="main", options=("--btrace-source=patch",), record=None, feed=()):
    with bench.Server("patch", exe, prog, args, list(options)) as s:
        cmds = ["set sysroot /", "set breakpoint pending on"] + list(feed)
        if start == "main":
            cmds += ["break __libc_start_main", "continue", "delete"]
        cmds += record or ["set record btrace bts buffer-size %d" % size, "record btrace"]
        cmds += ["catch syscall exit_group", "continue"]
        if feed:
            cmds.append("python pt_feed.write()")  # what the CPU would have written meanwhile
        cmds += timed(COMMANDS)
        out = bench.run_gdb(s.port, prog, cmds, timeout=3600)
    times = {k: float(v) for k, v in re.findall(r"TIME (.+?) ([0-9.]+)$", out, re.M)}
    m = re.search(r"Recorded (\d+) instructions in (\d+) functions", out)
    if len(times) != len(COMMANDS) or not m:
        raise SystemExit("size %d failed:\n%s" % (size, out[-3000:]))
    return times, int(m.group(1)), int(m.group(2))


def row(title, got):
    times = {k: statistics.median(g[0][k] for g in got) for k, _ in COMMANDS}
    print("| %s | %d | %d | %s |" % (title, got[-1][1], got[-1][2], " | ".join("%.2f s" % times[k] for k, _ in COMMANDS)),
          flush=True)


def pt_rows(build, tmp, loop, runs, aux_size):
    sys.path.insert(0, os.path.join(bench.REPO, "tests", "integration"))
    import hwfeeds  # noqa: E402 (the AUX ring layout the TEST ONLY server reads)
    prog, args = os.path.join(build, "inferiors", "bploop"), [str(loop)]
    stepper = os.path.join(tmp, "singlestep_pcs")
    subprocess.run(["cc", "-O2", "-o", stepper, os.path.join(bench.REPO, "bench", "singlestep_pcs.c")], check=True)
    pcs = os.path.join(tmp, "pcs")
    subprocess.run([stepper, pcs, prog] + args, check=True, stdout=subprocess.DEVNULL)
    aux, config = os.path.join(tmp, "pt.aux"), os.path.join(tmp, "pt.json")
    with open(config, "w") as f:
        json.dump({"pcs": pcs, "maps": os.path.join(tmp, "maps"), "stream": os.path.join(tmp, "stream"), "aux": aux,
                   "aux_size": aux_size, "tool": os.path.join(build, "tools", "pt_tool"), "psb_every": 4096}, f)
    bts, pt = [], []
    for _ in range(runs):
        bts.append(session(os.path.join(build, "server", "branchstub"), prog, args, 1 << 30, start="loader"))
        hwfeeds.AuxRing(aux, aux_size)  # empty when recording starts
        pt.append(session(os.path.join(build, "tests", "branchstub-testfeeds"), prog, args, 0, start="loader",
                          options=["--test-pt-aux=" + aux],
                          record=["set record btrace pt buffer-size %d" % aux_size, "record btrace pt"],
                          feed=hwfeeds.gdb_pt_feed(config)))
    row("bploop %d, BTS (patch source)" % loop, bts)
    row("bploop %d, PT (synthesized)" % loop, pt)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(bench.REPO, "build"))
    ap.add_argument("--sizes", default="64K,1M,4M,16M")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--pt", action="store_true")
    ap.add_argument("--synth", action="store_true")
    ap.add_argument("--loop", type=int, default=100000)
    # GDB reads the whole AUX buffer (hex) at its first read: as small as keeps the stream whole
    # (the instruction count says whether it was: a wrapped ring decodes from a later PSB).
    ap.add_argument("--aux-size", default="1M")
    a = ap.parse_args()
    exe = os.path.join(a.build, "server", "branchstub")
    tmp = tempfile.mkdtemp()
    if a.pt:
        print("| history | instructions | functions | " + " | ".join(k for k, _ in COMMANDS) + " |")
        print("|---|---:|---:|" + "---:|" * len(COMMANDS))
        pt_rows(a.build, tmp, a.loop, a.runs, size_bytes(a.aux_size))
        return
    big = os.path.join(tmp, "big.txt")
    text_file(big, 4 << 20)
    print("| buffer | instructions kept | functions | " + " | ".join(k for k, _ in COMMANDS) + " |")
    print("|---:|---:|---:|" + "---:|" * len(COMMANDS))
    for text in a.sizes.split(","):
        size = size_bytes(text)
        row(text + (", BTS" if a.synth else ""), [session(exe, "/bin/gzip", ["-c", big], size) for _ in range(a.runs)])
        if a.synth:
            pt = ["set record btrace pt buffer-size %d" % (size // 12), "record btrace pt"]
            row(text + ", PT (synthesized)",
                [session(exe, "/bin/gzip", ["-c", big], size, options=("--btrace-source=patch", "--synthesize-pt"),
                         record=pt) for _ in range(a.runs)])


if __name__ == "__main__":
    main()
