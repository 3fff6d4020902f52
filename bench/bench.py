#!/usr/bin/python3
"""branchstub vs Debian's gdbserver, driven by the same GDB batch sessions.

Each benchmark starts a fresh server (`--once :PORT PROG ARGS`), runs one `gdb -batch`
session against it, times the measured commands inside GDB (Python `time.perf_counter`
around them) and checks that the work was really done (hit counts, final PC, checksum of
the dump, thread count, instruction count). Runs are interleaved (A B A B ...) and the
medians are compared. Output: a markdown table on stdout and in bench/results/latest.md.

    bench/run.sh [--runs N] [--quick] [--only NAME[,NAME]] [--servers branchstub,gdbserver]

Not a pass/fail test: it reports figures; a failed proof marks the cell "FAILED".
"""

import argparse
import hashlib
import os
import platform
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GDB = shutil.which("gdb") or "/usr/bin/gdb"
GDB_SCRIPT = os.path.join(REPO, "scripts", "gdb", "branchstub.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, kind, exe, prog, args, options=()):
        self.kind, self.exe, self.prog, self.args, self.options = kind, exe, prog, args, list(options)

    def __enter__(self):
        self.port = free_port()
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([self.exe] + self.options + ["--once", ":%d" % self.port, self.prog] + self.args,
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        deadline = time.time() + 20
        while time.time() < deadline:
            self.log.seek(0)
            if b"Listening on port" in self.log.read():
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        self.log.seek(0)
        raise RuntimeError("%s did not start: %s" % (self.kind, self.log.read()[-2000:]))

    def __exit__(self, *exc):
        try:  # --once: it exits after the client's kill (and writes its plans first)
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.log.close()


def run_gdb(port, prog, commands, timeout):
    """Run gdb -batch; commands may use {port}. Returns the combined output."""
    script = "\n".join(["set pagination off", "set confirm off", "set width 0",
                        "target remote :%d" % port] + commands + ["kill"]) + "\n"
    with tempfile.NamedTemporaryFile("w", suffix=".gdb", delete=False) as f:
        f.write(script)
        path = f.name
    try:
        p = subprocess.run([GDB, "-batch", "-nx", "-x", path, prog], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        return p.stdout.decode("utf-8", "replace")
    finally:
        os.unlink(path)


# GDB's own CPU time over the timed part too: the protocol is request/reply and GDB does its
# part single-threaded, so no server can make the timed part shorter than that.
T0 = "python import time; __bs_t0 = time.perf_counter(); __bs_c0 = time.process_time()"
T1 = ("python print('BENCH_SECONDS %.6f BENCH_GDB_CPU %.6f' % (time.perf_counter() - __bs_t0, "
      "time.process_time() - __bs_c0))")


def seconds(out):
    m = re.findall(r"BENCH_SECONDS ([0-9.]+) BENCH_GDB_CPU ([0-9.]+)", out)
    if not m:
        raise RuntimeError("no timing in GDB output:\n" + out[-3000:])
    return float(m[-1][0]), float(m[-1][1])


def source_line(src, pattern):
    with open(src) as f:
        for i, line in enumerate(f, 1):
            if pattern in line:
                return i
    raise RuntimeError("%s: no line with %r" % (src, pattern))


# Each benchmark: name, unit, servers, prog, args, commands, work (units of work), proof(out) -> str.
def benchmarks(build, quick):
    inf = os.path.join(build, "inferiors")
    src = os.path.join(REPO, "tests", "inferiors")
    hits = 2000 if quick else 20000
    steps = 2000 if quick else 10000
    loop_iters = 5000 if quick else 55000   # ~18 instructions per iteration: ~1M instructions
    bploop_ret = source_line(os.path.join(src, "bploop.c"), "return 0;")
    out = []

    def proof_hits(o):
        m = re.search(r"already hit (\d+) times?", o)
        if not m or int(m.group(1)) != hits + 1:
            raise RuntimeError("hit count %s, expected %d" % (m and m.group(1), hits + 1))
        return "hit %s times" % m.group(1)
    out.append(dict(
        name="breakpoint hits", unit="hits/s", prog=os.path.join(inf, "bploop"),
        args=[str(hits + 2)], work=hits, proof=proof_hits, timeout=900,
        commands=["break hit", "continue", T0, "continue %d" % hits, T1, "info breakpoints"]))

    def proof_pc(o):
        m = re.search(r"FINAL_PC (0x[0-9a-f]+)", o)
        if not m:
            raise RuntimeError("no final PC")
        return "pc " + m.group(1)
    out.append(dict(
        name="stepi", unit="steps/s", prog=os.path.join(inf, "bploop"), args=["1000000"],
        work=steps, proof=proof_pc, same_proof=True, timeout=900,
        commands=["break hit", "continue", "delete", T0, "stepi %d" % steps, T1,
                  "python print('FINAL_PC 0x%x' % int(gdb.parse_and_eval('$pc')))"]))

    dump = os.path.join(tempfile.gettempdir(), "bs-bench-dump-%d.bin" % os.getpid())
    size = 64 << 20

    def proof_dump(o):
        if not _EXPECT:
            _EXPECT.append(expected_memdump_sha256(size))
        expect = _EXPECT[0]
        with open(dump, "rb") as f:
            got = hashlib.sha256(f.read()).hexdigest()
        os.unlink(dump)
        if got != expect:
            raise RuntimeError("sha256 of the dump %s != expected %s" % (got[:16], expect[:16]))
        return "sha256 ok"
    out.append(dict(
        name="memory read (64 MiB dump)", unit="MiB/s", prog=os.path.join(inf, "memdump"),
        args=[], work=64, proof=proof_dump, timeout=900,
        commands=["break ready", "continue", T0,
                  "dump binary memory %s buf buf+buf_size" % dump, T1]))

    def proof_threads(o):
        n = len(re.findall(r"^[ *] +\d+ +Thread ", o, re.M))
        if n != 201:
            raise RuntimeError("info threads listed %d threads, expected 201" % n)
        return "201 threads"
    out.append(dict(
        name="200 threads (info threads + thread apply all bt)", unit="s", lower_is_better=True,
        prog=os.path.join(inf, "many_threads"), args=["200"], work=None, proof=proof_threads,
        timeout=900, commands=["break all_ready", "continue", T0, "info threads",
                               "thread apply all bt", T1]))

    def proof_main(o):
        if "main ()" not in o and "main (" not in o:
            raise RuntimeError("did not stop in main")
        return "stopped in main"
    out.append(dict(
        name="startup to main", unit="s", lower_is_better=True, whole_session=True,
        prog=os.path.join(inf, "bploop"), args=["1"], work=None, proof=proof_main, timeout=300,
        commands=["break main", "continue"]))

    def proof_insns(o):
        m = re.search(r"(?:Recorded|Log contains) (\d+) instructions", o)
        if not m:
            raise RuntimeError("no instruction count from info record")
        return "%s instructions" % m.group(1)
    common = ["break hit", "continue", "delete", "tbreak bploop.c:%d" % bploop_ret]
    out.append(dict(
        name="btrace: traced instructions (branchstub record btrace vs gdbserver record full)",
        unit="insns/s", prog=os.path.join(inf, "bploop"), args=[str(loop_iters)],
        work="insns", proof=proof_insns, timeout=1800,
        commands_by_server={
            "branchstub": common + ["set record btrace bts buffer-size 268435456",
                                    "record btrace", T0, "continue", T1, "info record"],
            "gdbserver": common + ["set record full insn-number-max unlimited",
                                   "record full", T0, "continue", T1, "info record"]}))

    out.append(dict(
        name="stepbranch 1000 vs Python stepi loop", unit="branches/s",
        prog=os.path.join(inf, "bploop"), args=["1000000"], work=1000, proof=proof_pc,
        same_proof=True, timeout=1800,
        commands_by_server={
            "branchstub": ["source " + GDB_SCRIPT, "break hit", "continue", "delete", T0,
                           "stepbranch 1000", T1,
                           "python print('FINAL_PC 0x%x' % int(gdb.parse_and_eval('$pc')))"],
            "gdbserver": ["source " + GDB_SCRIPT, "break hit", "continue", "delete", T0,
                          "stepbranch --client 1000", T1,
                          "python print('FINAL_PC 0x%x' % int(gdb.parse_and_eval('$pc')))"]}))

    # Watchpoints where the debug registers do not trap: branchstub's emulation (it single-steps
    # in the server and computes each instruction's accesses) against GDB's own software
    # watchpoint over gdbserver (GDB single-steps over the wire and compares the value).
    writes = 100 if quick else 500

    def proof_target(o):
        m = re.search(r"TARGET (\d+)", o)
        if not m or int(m.group(1)) != writes:
            raise RuntimeError("stopped with target = %s, expected %d" % (m and m.group(1), writes))
        return "target = %d" % writes
    # The first `continue` stops at the first write; `continue N` then ignores the watchpoint
    # N-1 times (every change is still a stop in GDB, which resumes at once).
    watch_common = ["break main", "continue", "watch target", "continue", T0, "continue %d" % (writes - 1), T1,
                    "python print('TARGET %d' % int(gdb.parse_and_eval('target')))"]
    out.append(dict(
        name="watchpoint without debug registers (emulated vs GDB software watchpoint)",
        unit="writes/s", prog=os.path.join(inf, "watchloop"), args=[str(writes + 10)], work=writes - 1,
        proof=proof_target, same_proof=True, timeout=1800,
        server_options={"branchstub": ["--watchpoints=software"]},
        commands_by_server={"branchstub": watch_common,
                            "gdbserver": ["set can-use-hw-watchpoints 0"] + watch_common}))
    out.append(dict(
        name="watchpoint with debug registers (both servers; where DR7 traps)",
        unit="writes/s", prog=os.path.join(inf, "watchloop"), args=[str(writes * 20 + 10)], work=writes * 20 - 1,
        proof=lambda o: proof_target(o.replace("TARGET %d" % (writes * 20), "TARGET %d" % writes)),
        same_proof=True, timeout=1800, needs_debug_registers=True,
        server_options={"branchstub": ["--watchpoints=hardware"]},
        commands=["break main", "continue", "watch target", "continue", T0, "continue %d" % (writes * 20 - 1), T1,
                  "python print('TARGET %d' % int(gdb.parse_and_eval('target')))"]))
    return out


def debug_registers_trap(build):
    out = subprocess.run([os.path.join(build, "server", "branchstub"), "--probe"], capture_output=True,
                         text=True, timeout=60).stdout
    m = re.search(r"^debug registers\s+(yes|no)\s+(.*)$", out, re.M)
    return (m.group(1) == "yes", m.group(2)) if m else (False, "no probe line")


_EXPECT = []


def expected_memdump_sha256(size):
    """sha256 of memdump.c's buffer, computed independently by a tiny C program (fast)."""
    code = ("#include <stdio.h>\nint main(void){static unsigned char b[1<<20];"
            "for(unsigned long o=0;o<%dul;o+=sizeof b){for(unsigned long j=0;j<sizeof b;j++)"
            "b[j]=(unsigned char)(((unsigned)(o+j)*2654435761u)>>24);"
            "fwrite(b,1,sizeof b,stdout);}return 0;}\n" % size)
    with tempfile.TemporaryDirectory() as d:
        c, exe = os.path.join(d, "gen.c"), os.path.join(d, "gen")
        with open(c, "w") as f:
            f.write(code)
        subprocess.run(["cc", "-O2", "-o", exe, c], check=True)
        data = subprocess.run([exe], stdout=subprocess.PIPE, check=True).stdout
    if len(data) != size:
        raise RuntimeError("expected-content generator wrote %d bytes" % len(data))
    return hashlib.sha256(data).hexdigest()


def run_one(bench, kind, exe):
    cmds = bench.get("commands_by_server", {}).get(kind) or bench["commands"]
    with Server(kind, exe, bench["prog"], bench["args"], bench.get("server_options", {}).get(kind, ())) as srv:
        t = time.perf_counter()
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)    # GDB is the only child reaped below
        out = run_gdb(srv.port, bench["prog"], cmds, bench["timeout"])
        wall = time.perf_counter() - t
        ru2 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if bench.get("whole_session"):
        secs, gdb_cpu = wall, (ru2.ru_utime - ru.ru_utime) + (ru2.ru_stime - ru.ru_stime)
    else:
        secs, gdb_cpu = seconds(out)
    proof = bench["proof"](out)
    work = bench["work"]
    if work == "insns":
        work = int(re.search(r"(\d+)", proof).group(1))
    value = secs if work is None else work / secs
    return value, proof, secs, gdb_cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.environ.get("BRANCHSTUB_BUILD", os.path.join(REPO, "build")))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="smaller sizes, for trying the driver")
    ap.add_argument("--only", default="", help="comma-separated substrings of benchmark names")
    ap.add_argument("--servers", default="branchstub,gdbserver")
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "results", "latest.md"))
    a = ap.parse_args()

    exes = {"branchstub": os.path.join(a.build, "server", "branchstub"),
            "gdbserver": shutil.which("gdbserver") or "/usr/bin/gdbserver"}
    kinds = [k for k in a.servers.split(",") if k]
    for k in kinds:
        if not os.access(exes[k], os.X_OK):
            sys.exit("bench: %s not found at %s (build first: bash scripts/build.sh)" % (k, exes[k]))

    rows = []
    for bench in benchmarks(a.build, a.quick):
        if a.only and not any(s.strip() in bench["name"] for s in a.only.split(",")):
            continue
        if bench.get("needs_debug_registers"):
            works, why = debug_registers_trap(a.build)
            if not works:
                print("  %-55s skipped: %s" % (bench["name"][:55], why), flush=True)
                continue
        values = {k: [] for k in kinds}
        proofs = {k: [] for k in kinds}
        walls = {k: [] for k in kinds}
        cpus = {k: [] for k in kinds}
        errors = {}
        for r in range(a.runs):
            for k in kinds:                       # interleaved: A B A B ...
                if k in errors:
                    continue
                try:
                    v, p, w, c = run_one(bench, k, exes[k])
                    values[k].append(v)
                    proofs[k].append(p)
                    walls[k].append(w)
                    cpus[k].append(c)
                    print("  %-55s %-10s run %d: %.4g %s (%s; GDB CPU %.3f of %.3f s)" % (
                        bench["name"][:55], k, r + 1, v, bench["unit"], p, c, w), flush=True)
                except Exception as e:            # noqa: BLE001 - report and go on
                    errors[k] = str(e).splitlines()[0][:200]
                    print("  %-55s %-10s run %d: FAILED: %s" % (bench["name"][:55], k, r + 1,
                                                               errors[k]), flush=True)
        if bench.get("same_proof") and all(proofs[k] for k in kinds) and len(kinds) > 1:
            if len({p for k in kinds for p in proofs[k]}) != 1:
                errors["proof"] = "servers ended at different PCs: %s" % proofs
        rows.append((bench, values, proofs, errors, walls, cpus))

    lines = ["# branchstub vs gdbserver", "",
             "- date: %s" % time.strftime("%Y-%m-%d %H:%M:%S %z"),
             "- host: %s, kernel %s, %d CPUs" % (cpu_model(), platform.release(), os.cpu_count()),
             "- gdb: %s" % first_line([GDB, "--version"]),
             "- gdbserver: %s" % first_line([exes["gdbserver"], "--version"]),
             "- runs per server: %d (interleaved), medians%s" % (a.runs, ", --quick sizes" if a.quick else ""),
             "", "| benchmark | unit | branchstub | gdbserver | ratio (branchstub/gdbserver) "
             "| GDB CPU / timed wall (branchstub runs) | ceiling | proof |",
             "|---|---|---|---|---|---|---|---|"]
    for bench, values, proofs, errors, walls, cpus in rows:
        med = {k: statistics.median(values[k]) if values[k] else None for k in kinds}
        cell = lambda k: ("FAILED: " + errors[k]) if k in errors else (  # noqa: E731
            "%.4g" % med[k] if k in med and med[k] is not None else "not run")
        b, g = med.get("branchstub"), med.get("gdbserver")
        if b and g:
            ratio = (g / b) if bench.get("lower_is_better") else (b / g)
            ratio_s = "%.2f×%s" % (ratio, " (time: gdbserver/branchstub)" if bench.get("lower_is_better") else "")
        else:
            ratio_s = "—"
        proof = "; ".join(sorted({p for k in kinds for p in proofs[k]}))
        if "proof" in errors:
            proof = "FAILED: " + errors["proof"]
        # The best ratio any server could reach: gdbserver's time over GDB's own CPU time.
        cpu_s, ceiling_s = "—", "—"
        if cpus.get("branchstub") and walls.get("branchstub"):
            cpu = statistics.median(cpus["branchstub"])
            cpu_s = "%.3f / %.3f s" % (cpu, statistics.median(walls["branchstub"]))
            if walls.get("gdbserver") and cpu > 0 and bench.get("work") != "insns":
                ceiling_s = "%.2f×" % (statistics.median(walls["gdbserver"]) / cpu)
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (bench["name"], bench["unit"],
                     cell("branchstub"), cell("gdbserver"), ratio_s, cpu_s, ceiling_s, proof))
    lines += ["", "Ratios above 1 mean branchstub is faster. \"GDB CPU\" is GDB's own CPU time "
              "over the timed part (the whole GDB process for whole-session rows); since GDB "
              "waits for each reply before it goes on, no server can make the timed part shorter, "
              "so \"ceiling\" (gdbserver's time over that CPU time) is the most any server could "
              "gain on that row. The btrace row compares "
              "branchstub's `record btrace` with GDB's `record full` over gdbserver (gdbserver "
              "has no btrace on machines without BTS/PT); the stepbranch row compares "
              "`stepbranch 1000` on branchstub with `stepbranch --client 1000` (a Python loop "
              "of `stepi`) on gdbserver. The first watchpoint row runs branchstub with "
              "`--watchpoints=software` (its emulation, as on hosts whose debug registers do "
              "not trap) against GDB's `set can-use-hw-watchpoints 0` over gdbserver; the "
              "second uses the debug registers on both (skipped where they do not trap)."]
    text = "\n".join(lines) + "\n"
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        f.write(text)
    print()
    print(text)
    print("written to %s" % a.out)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def first_line(cmd):
    try:
        return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=10).stdout.decode().splitlines()[0]
    except Exception:  # noqa: BLE001
        return "unknown"


if __name__ == "__main__":
    main()
