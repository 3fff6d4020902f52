"""The hardware paths for real: perf BTS, Intel PT, the msr_helper LBR and PTRACE_SINGLEBLOCK,
each against the single-step truth, with the real GDB. Every test runs only where `branchstub
--probe` says the mechanism works and otherwise skips with the probe's reason: on our VMs they
all skip; on an Intel machine kmod-helper/tests/hardware-check.sh runs them (see
kmod-helper/README.md). Nothing here is replayed or simulated."""
import re

import pytest

from harness import gdb_remote, inferior, server_probe
from test_btrace import CALLS, HISTORY, call_histories, pcs_printed, recorded
from test_stepbranch import run_gdb_py, steps
from truth import stepi_truth

pytestmark = pytest.mark.branchstub_only

BRANCHES = inferior("branches")
BPLOOP = inferior("bploop")


def need(mechanism):
    works, why = server_probe().get(mechanism, (False, "the probe printed no %r line" % mechanism))
    if not works:
        pytest.skip("%s: %s" % (mechanism, why))


def check_history(out, t, fmt):
    assert "Recording format: %s." % fmt in out, out
    assert recorded(out) == [t.count], (t.count, out)
    assert "(0 gaps)" in out, out
    assert call_histories(out)[-1] == t.call_history(), (t.call_history(), out)
    pcs = pcs_printed(out)
    assert pcs[0] == t.pcs[-1] and pcs[1] == t.start, out


def traced(procs, record, server_args=()):
    srv = procs.server(["--once"] + list(server_args) + ["{COMM}", BRANCHES])
    return gdb_remote(srv, HISTORY + ["break trace_begin", "continue", record, "break trace_end", "continue",
                                      "info record", *CALLS, "reverse-stepi", "p/x $pc", "record goto begin",
                                      "p/x $pc", "record goto end", "monitor btrace status", "record stop",
                                      "continue"], prog=BRANCHES, timeout=120).out


def test_real_perf_bts(procs):
    need("perf BTS")
    t = stepi_truth("branches")
    out = traced(procs, "record btrace bts", ["--btrace-source=bts"])
    assert "perf-bts: used" in out, out
    check_history(out, t, "Branch Trace Store")


def test_real_intel_pt(procs):
    need("Intel PT")
    t = stepi_truth("branches")
    out = traced(procs, "record btrace pt")
    check_history(out, t, "Intel Processor Trace")


def test_real_lbr_windows_in_a_loop(procs):
    works, why = server_probe().get("msr_helper (LBR module)", (False, "no msr_helper line"))
    if not works or "simulate_lbr" in why:
        pytest.skip("msr_helper with a real LBR: " + why)
    t = stepi_truth("bploop", "main", "loop_done", args=["20"], marks=["hit"])
    hit = t.marks["hit"]
    first = t.pcs.index(hit)
    fourth = [i for i, pc in enumerate(t.pcs) if pc == hit][3]
    srv = procs.server(["--once", "--btrace-source=lbr", "{COMM}", BPLOOP, "20"])
    out = gdb_remote(srv, HISTORY + ["break hit", "continue", "record btrace bts"] + ["continue"] * 3 + [
        "info record", *CALLS, "monitor btrace status", "kill"], prog=BPLOOP, timeout=120).out
    assert "lbr: used (msr_helper" in out, out
    assert recorded(out) == [fourth - first], (first, fourth, out)
    assert "(0 gaps)" in out, out


def test_real_singleblock_stepbranch(procs):
    need("BTF (PTRACE_SINGLEBLOCK)")
    t = stepi_truth("branches")
    want = t.taken_branches()
    r = run_gdb_py(procs, BRANCHES, '''
ex("break trace_begin"); ex("continue"); ex("delete")
for i in range(%d):
    stepbranch()
ex("continue")
''' % len(want))
    assert "stepbranch-mechanism:singleblock" in r.out or "singleblock" in r.out, r
    got = steps(r.out)
    assert [(g[0], g[1]) for g in got] == [(b[0], b[1]) for b in want], r
