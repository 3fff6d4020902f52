"""perf BTS and LBR data through the real GDB 13 (issue 10, item 2). None of our machines has
BTS or LBR, so the server reads, TEST ONLY, what the kernel / the msr_helper module would have
given (hwfeeds.py builds it from the single-step truth of the same program): the perf ring
through the real BTS reader (--test-bts-ring), LBR snapshots through the real stitching
(--test-lbr-snapshots). GDB must then show exactly the truth: `info record`, the call history,
`reverse-stepi`, including a ring that wraps, a delta read after an overflow, and LBR windows
with a gap, which GDB shows as one."""
import re

import pytest

import hwfeeds
from harness import gdb_remote, inferior
from test_btrace import CALLS, HISTORY, call_histories, pcs_printed, recorded
from truth import stepi_truth

pytestmark = pytest.mark.branchstub_only

BRANCHES = inferior("branches")
BPLOOP = inferior("bploop")
LOOPS = 100    # bploop iterations: ~300 branches, more than a 4 KiB ring holds (170)


def insn_history(out, marker="==INSNS=="):
    """Addresses of a marked `record instruction-history` listing; gaps as None."""
    sec = out.split(marker + "\n", 1)[1].split("==END==", 1)[0]
    got = []
    for line in sec.splitlines():
        m = re.match(r"^\d+\t(?:=> )?\s*(0x[0-9a-f]+)", line)
        if m:
            got.append(int(m.group(1), 16))
        elif re.match(r"^\d+\t\[", line):          # "[decode error (1): instruction overflow]"
            got.append(None)
    return got


def INSNS(range_=""):
    return ["echo ==INSNS==\\n", "record instruction-history %s" % range_, "echo ==END==\\n"]


def segments(funcs):
    seq = []
    for f in funcs:
        if not seq or seq[-1] != f:
            seq.append(f)
    return seq


def bts_server(procs, tmp_path, truth, data_size, kernel_every=0, prog=BRANCHES, args=()):
    ring = str(tmp_path / "bts.ring")
    config = str(tmp_path / "feed.json")
    hwfeeds.bts_feed_config(config, truth, ring, data_size, kernel_every)
    hwfeeds.PerfRing(ring, data_size)        # exists (empty) when GDB enables recording
    srv = procs.server(["--once", "--btrace-source=bts", "--test-bts-ring=" + ring, "{COMM}", prog] + list(args))
    return srv, config


def test_bts_ring_through_gdb_equals_the_truth(procs, tmp_path):
    t = stepi_truth("branches")
    srv, config = bts_server(procs, tmp_path, t, 0x10000, kernel_every=5)
    r = gdb_remote(srv, HISTORY + hwfeeds.gdb_bts_feed(config) + [
        "break trace_begin", "continue", "record btrace bts", "break trace_end", "continue",
        "python bs_feed.advance()",                      # what BTS wrote from begin to end
        "info record", *CALLS, *INSNS(),
        "reverse-stepi", "p/x $pc",
        "record goto begin", "p/x $pc", "record goto end",
        "monitor btrace status",
        "record stop", "continue"], prog=BRANCHES, timeout=120)
    out = r.out
    assert "Recording format: Branch Trace Store." in out, r
    assert "perf-bts: used" in out and "TEST ONLY" in out, r       # the BTS reader, not software
    assert recorded(out) == [t.count], (t.count, r)
    assert "(0 gaps)" in out and "warning" not in out.lower(), r
    assert call_histories(out)[-1] == t.call_history(), (t.call_history(), r)
    assert insn_history(out) == t.pcs, r
    pcs = pcs_printed(out)
    assert pcs[0] == t.pcs[-1], "reverse-stepi lands on the last executed instruction"
    assert pcs[1] == t.start, "record goto begin"
    assert re.search(r"\[Inferior 1 \(process \d+\) exited normally\]", out), r


def test_bts_ring_wraps_and_a_delta_after_overflow_reads_new(procs, tmp_path):
    t = stepi_truth("bploop", "main", "loop_done", args=[str(LOOPS)], marks=["hit"])
    hit = t.marks["hit"]
    size = 4096
    capacity = size // 24                            # 170 records
    recs = hwfeeds.branches_between(t, 0, len(t.pcs))
    # stop 1 at hit(5); stop 2 at the first hit(k) whose records cross the end of the ring
    # without overflowing it (a wrapped delta); stop 3 at the end, more than a ring later
    i1 = hwfeeds.index_of(t, hit, 0, 6)
    n1 = len(hwfeeds.branches_between(t, 0, i1))
    nth = 1
    while True:
        i2 = hwfeeds.index_of(t, hit, i1, nth)
        n2 = len(hwfeeds.branches_between(t, i1, i2))
        if n1 + n2 > capacity:
            break
        nth += 1
    assert n2 < capacity and len(recs) - n1 - n2 > capacity, "bploop %d does not fit the plan" % LOOPS
    srv, config = bts_server(procs, tmp_path, t, size, prog=BPLOOP, args=[str(LOOPS)])
    r = gdb_remote(srv, HISTORY + hwfeeds.gdb_bts_feed(config) + [
        "set record btrace bts buffer-size %d" % size,
        "break main", "continue", "record btrace bts",
        "break hit if i == 5", "continue", "python bs_feed.advance(nth=6)",
        "info record",                                   # delta 1: no wrap
        "delete", "break hit if i == %d" % (5 + nth), "continue", "python bs_feed.advance(nth=%d)" % nth,
        "info record",                                   # delta 2: records across the ring's end
        "delete", "break loop_done", "continue", "python bs_feed.advance()",
        "info record",                                   # more than a ring: overflow, GDB reads `new`
        *CALLS, *INSNS(), "reverse-stepi", "p/x $pc", "record goto begin", "p/x $pc",
        "record goto end", "continue"], prog=BPLOOP, timeout=180)
    out = r.out
    # reads 1 and 2 stitch onto what GDB had: everything from main's breakpoint on
    counts = recorded(out)
    assert counts[:2] == [i1, i2], (i1, i2, r)
    # read 3: the ring holds the newest 170 records; GDB's history starts at the target of
    # the oldest one (the older partial block is dropped) and runs to the end
    first = sorted(hwfeeds.branch_table(t))[-capacity] + 1
    assert counts[2] == len(t.pcs) - first, (first, r)
    assert "warning" not in out.lower() and "(0 gaps)" in out, r
    assert insn_history(out) == t.pcs[first:], r
    assert call_histories(out)[-1] == segments(t.funcs[first:] + [t.end_func]), r
    pcs = pcs_printed(out)
    assert pcs[0] == t.pcs[-1] and pcs[1] == t.pcs[first], r
    assert "exited normally" in out, r


def lbr_server(procs, tmp_path, snapshots):
    return procs.server(["--once", "--btrace-source=lbr", "--test-lbr-snapshots=" + snapshots,
                         "{COMM}", BPLOOP, str(LOOPS)])


@pytest.mark.parametrize("count", [True, False], ids=["counted", "fitted"])
def test_lbr_windows_with_a_breakpoint_in_a_loop(procs, tmp_path, count):
    """Each stop at hit() is one loop iteration later; with a depth-16 stack every window
    overlaps the last one. (The old dedup appended nothing after the first stop.) Without the
    PMU's count the windows are fitted to the code, which gets this case right too."""
    t = stepi_truth("bploop", "main", "loop_done", args=[str(LOOPS)], marks=["hit"])
    hit = t.marks["hit"]
    arm = hwfeeds.index_of(t, hit, 0, 1)
    stops = [hwfeeds.index_of(t, hit, arm, k) for k in (1, 2, 3, 4)]
    snaps = str(tmp_path / "lbr.snap")
    hwfeeds.write_lbr_snapshots(snaps, t, arm, stops, 16, count=count)
    srv = lbr_server(procs, tmp_path, snaps)
    r = gdb_remote(srv, HISTORY + [
        "break hit", "continue", "record btrace bts"] + ["continue"] * 4 + [
        "info record", *CALLS, *INSNS(), "reverse-stepi", "p/x $pc", "record goto begin", "p/x $pc",
        "record goto end", "monitor btrace status", "kill"], prog=BPLOOP, timeout=120)
    out = r.out
    assert "lbr: used (TEST replay of" in out, r
    assert recorded(out) == [stops[-1] - arm], (arm, stops, r)
    assert "(0 gaps)" in out and "warning" not in out.lower(), r
    assert insn_history(out) == t.pcs[arm:stops[-1]], r
    assert call_histories(out)[-1] == segments(t.funcs[arm:stops[-1]] + ["hit"]), r
    pcs = pcs_printed(out)
    assert pcs[0] == t.pcs[stops[-1] - 1] and pcs[1] == hit, r


def test_lbr_windows_that_do_not_overlap_show_a_gap_in_gdb(procs, tmp_path):
    """Two stops in the loop, then one at loop_done ~280 branches later: the last window cannot
    reach back, and the count says so. GDB shows one gap; around it, exactly the truth."""
    t = stepi_truth("bploop", "main", "loop_done", args=[str(LOOPS)], marks=["hit"])
    hit = t.marks["hit"]
    arm = hwfeeds.index_of(t, hit, 0, 1)
    s1 = hwfeeds.index_of(t, hit, arm, 1)
    end = len(t.pcs)
    snaps = str(tmp_path / "lbr.snap")
    hwfeeds.write_lbr_snapshots(snaps, t, arm, [s1, end], 16, count=True)
    srv = lbr_server(procs, tmp_path, snaps)
    r = gdb_remote(srv, HISTORY + [
        "break hit", "continue", "record btrace bts", "continue", "info record",
        "delete", "break loop_done", "continue",
        "info record", *CALLS, *INSNS(), "reverse-stepi", "p/x $pc", "record goto begin", "p/x $pc",
        "record goto end", "monitor btrace history 20", "kill"], prog=BPLOOP, timeout=120)
    out = r.out
    k0 = sorted(i for i in hwfeeds.branch_table(t) if i >= arm)[-16]   # the oldest window branch
    # before the gap: from arming to the instruction the thread stopped at (it ran on from
    # there); after it: the oldest window branch itself, then everything from its target on
    expected = t.pcs[arm:s1 + 1] + [None] + t.pcs[k0:]
    assert insn_history(out) == expected, r
    counts = recorded(out)
    assert counts[0] == s1 - arm, r
    assert counts[1] == len(expected), r          # GDB numbers the gap like an instruction
    assert "(1 gaps)" in out, r
    assert "Recorded trace may be corrupted" in out, r   # GDB 13's words for a BTS gap
    assert "-- gap: the branches here were not recorded" in out, r
    pcs = pcs_printed(out)
    assert pcs[0] == t.pcs[-1] and pcs[1] == hit, r
