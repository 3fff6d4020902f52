"""The `stepbranch` extension (issue 4). branchstub only. Truth from truth.py (stepi)."""
import os
import re

import pytest

from harness import (GDB_SCRIPT, LLDB_SCRIPT, gdb, gdb_remote, inferior, line_of, lldb,
                     target_cmd)
from truth import stepi_truth

pytestmark = pytest.mark.branchstub_only

BRANCHES = inferior("branches")

# One stepbranch from GDB: the shipped helper command when it exists, else the raw packet
# followed by the flush GDB needs after `maint packet` (a `maint packet` reply changes nothing GDB knows).
_DRIVER = r'''
import gdb, re
def ex(c):
    return gdb.execute(c, to_string=True)
USE_SCRIPT = %(use_script)r
if USE_SCRIPT:
    ex("source " + %(script)r)
def stepbranch():
    if USE_SCRIPT:
        o = ex("stepbranch")
        m = re.search(r"branch (0x[0-9a-f]+) -> (0x[0-9a-f]+)", o)
    else:
        o = ex("maint packet stepbranch")
        ex("maint flush register-cache")
        ex("maint flush dcache")
        m = re.search(r"branch-from:([0-9a-f]+);branch-to:([0-9a-f]+)", o)
    pc = int(gdb.parse_and_eval("$pc"))
    fr, to = (int(m.group(1), 16), int(m.group(2), 16)) if m else (None, None)
    sig = bool(re.search(r"T0a|SIGUSR1", o))
    print("SB %%s %%s %%x %%d | %%s" %% (fr, to, pc, sig, o.strip().replace("\n", " ")[:300]))
    return pc, sig
'''


def driver():
    use = os.path.exists(GDB_SCRIPT)
    return _DRIVER % {"use_script": use, "script": GDB_SCRIPT}


def steps(out):
    """[(from, to, pc, signal)] printed by the driver."""
    res = []
    for fr, to, pc, sig in re.findall(r"^SB (\S+) (\S+) ([0-9a-f]+) ([01]) \|", out, re.M):
        res.append((None if fr == "None" else int(fr), None if to == "None" else int(to),
                    int(pc, 16), sig == "1"))
    return res


# TEST ONLY (the test build of the server, tests/support): PTRACE_SINGLEBLOCK whatever the probe
# says (see docs/btrace.md). Where BTF works
# this is the real single-block path; where the hypervisor ignores BTF every block step stops
# after one instruction and the classifier must hand the stepbranch to the software mechanism.
FORCED_SINGLEBLOCK = ["--test-singleblock"]
MECHANISMS = [pytest.param((), id="auto"), pytest.param(FORCED_SINGLEBLOCK, id="forced-singleblock")]


def run_gdb_py(procs, prog, body, pre=(), timeout=120, mechanism=()):
    srv = procs.server(["--once"] + list(mechanism) + ["{COMM}", prog])
    script = driver() + "\n" + body
    return gdb_remote(srv, ["set breakpoint always-inserted on"] + list(pre), prog=prog,
                      pyscript=script, timeout=timeout)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_stepbranch_visits_exactly_the_taken_branches(procs, mechanism):
    t = stepi_truth("branches")
    want = t.taken_branches()
    kinds = " ".join(b[2] for b in want)
    # the region really has what the issue lists (checked on the truth, not on the server)
    for k in ("call   *%", "jmp    *%", "ret", "jle", "getpid"):
        assert k in kinds, k
    n = len(want)
    r = run_gdb_py(procs, BRANCHES, '''
ex("break trace_begin"); ex("continue"); ex("delete")
for i in range(%d):
    stepbranch()
ex("continue")
''' % n, mechanism=mechanism)
    got = steps(r.out)
    assert len(got) == n, r
    assert [g[2] for g in got] == [b[1] for b in want], (want, r)            # where it stops
    assert [(g[0], g[1]) for g in got[:20]] == [(b[0], b[1]) for b in want[:20]], r
    assert "exited normally" in r.out, r


def test_breakpoint_before_any_branch_stops_there(procs):
    h = "branches.h"
    r = run_gdb_py(procs, BRANCHES, '''
ex("break %s:%d"); ex("continue")
o = ex("break %s:%d")
bp = int(re.search(r"at (0x[0-9a-f]+)", o).group(1), 16)
pc, sig = stepbranch()
print("BP-AT %%x PC %%x" %% (bp, pc))
ex("delete"); ex("continue")
''' % (h, line_of(h, "region-start"), h, line_of(h, "region-straight")))
    m = re.search(r"BP-AT ([0-9a-f]+) PC ([0-9a-f]+)", r.out)
    assert m and m.group(1) == m.group(2), r
    assert "exited normally" in r.out, r


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_signal_during_stepbranch(procs, mechanism):
    prog = inferior("branches_signal")
    r = run_gdb_py(procs, prog, '''
ex("handle SIGUSR1 nostop noprint pass")
ex("break trace_begin"); ex("continue"); ex("delete")
ex("handle SIGUSR1 stop print pass")
for i in range(400):
    pc, sig = stepbranch()
    if sig:
        print("GOT-SIGNAL")
        break
print(ex("signal SIGUSR1"))
''', mechanism=mechanism)
    assert "GOT-SIGNAL" in r.out, r
    assert "exited with code 02" in r.out, r        # the handler ran for both raises


@pytest.mark.skipif(not os.path.exists(GDB_SCRIPT), reason="scripts/gdb/branchstub.py not there yet")
def test_gdb_view_consistent_after_stepbranch(procs):
    t = stepi_truth("branches")
    want = t.taken_branches()[:3]
    srv = procs.server(["--once", "{COMM}", BRANCHES])
    r = gdb_remote(srv, ["source " + GDB_SCRIPT, "break trace_begin", "continue", "delete",
                         "stepbranch", "stepbranch", "stepbranch",
                         "bt", "info registers rip", "x/i $pc", "p $pc", "stepbranch 2",
                         "info registers rip", "continue"], prog=BRANCHES)
    out = r.out
    arrows = re.findall(r"branch (0x[0-9a-f]+) -> (0x[0-9a-f]+) <([^>]+)>", out)
    assert [(int(a, 16), int(b, 16)) for a, b, _ in arrows[:3]] == [(b[0], b[1]) for b in want], r
    to = want[2][1]
    assert re.search(r"^rip +0x%x " % to, out, re.M), r
    assert re.search(r"=> 0x%x <" % to, out), r
    assert re.search(r"#0 +(0x[0-9a-f]+ in )?add1 ", out), r       # 3rd branch: call *%rdx
    assert re.search(r"#1 +0x[0-9a-f]+ in region ", out), r
    rips = re.findall(r"^rip +(0x[0-9a-f]+) ", out, re.M)
    assert int(rips[-1], 16) == t.taken_branches()[4][1], r
    assert "exited normally" in out, r


@pytest.mark.skipif(not os.path.exists(LLDB_SCRIPT), reason="scripts/lldb/branchstub_lldb.py not there yet")
def test_lldb_stepbranch(procs):
    t = stepi_truth("branches")
    want = t.taken_branches()[:3]
    srv = procs.server(["--once", "{COMM}", BRANCHES])
    r = lldb(["command script import " + LLDB_SCRIPT, "gdb-remote 127.0.0.1:%d" % srv.port,
              "b trace_begin", "c", "breakpoint delete 1",
              "stepbranch", "register read rip", "stepbranch", "register read rip",
              "stepbranch", "register read rip", "bt", "process kill"], timeout=90)
    rips = [int(x, 16) for x in re.findall(r"^\s+rip = (0x[0-9a-f]+)", r.out, re.M)]
    assert rips == [b[1] for b in want], (want, r)
    assert re.search(r"frame #0: 0x[0-9a-f]+ branches`add1", r.out), r
    assert re.search(r"frame #1: 0x[0-9a-f]+ branches`region", r.out), r


@pytest.mark.skipif(not os.path.exists(GDB_SCRIPT), reason="scripts/gdb/branchstub.py not there yet")
def test_reverse_stepbranch_while_recording(procs):
    t = stepi_truth("branches")
    want = t.taken_branches()[:5]
    srv = procs.server(["--once", "{COMM}", BRANCHES])
    r = gdb_remote(srv, ["source " + GDB_SCRIPT, "break trace_begin", "continue", "delete",
                         "record btrace"] + ["stepbranch"] * 5 +
                   ["reverse-stepbranch", "p/x $pc"] * 5 + ["record stop", "continue"],
                   prog=BRANCHES)
    pcs = [int(x, 16) for x in re.findall(r"^\$\d+ = (0x[0-9a-f]+)$", r.out, re.M)]
    froms = [b[0] for b in reversed(want)]                        # back onto each branch insn
    tos = [b[1] for b in reversed(want[:-1])] + [t.start]         # or just after the previous one
    assert pcs in (froms, tos), (want, r)
    assert "exited normally" in r.out, r


def test_monitor_stepbranch_and_help(procs):
    t = stepi_truth("branches")
    srv = procs.server(["--once", "{COMM}", BRANCHES])
    r = gdb_remote(srv, ["monitor help", "break trace_begin", "continue", "delete",
                         "set breakpoint always-inserted on",
                         "monitor stepbranch", "maint flush register-cache", "p/x $pc",
                         "continue"], prog=BRANCHES)
    assert "The following monitor commands are supported:" in r.out, r
    assert "stepbranch" in r.out[r.out.index("supported:"):], r
    assert re.search(r"^\$1 = 0x%x$" % t.taken_branches()[0][1], r.out, re.M), r
    assert "exited normally" in r.out, r
