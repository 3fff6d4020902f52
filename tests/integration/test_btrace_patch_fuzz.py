"""Differential fuzz of the block-patching source (issue 11): random small C programs
(randprog.py: arithmetic, if/else, loops, switch, calls, function pointers, recursion), built
at -O0, -O1 and -O2 in turn, recorded from trace_begin() to trace_end() under
--btrace-source=soft and =patch: GDB's `info record`, instruction history and function-call
history must be the same line by line. Seeds divisible by 4 run with a 4 KiB ring (TEST ONLY),
so that the ring fills and is drained at arbitrary points. The seeds are fixed (reproducible);
BTRACE_FUZZ_SEEDS ("1-200" or "3,17") runs others, e.g. for a longer hunt, and
BTRACE_FUZZ_OPTS ("-Os,-O3") other optimisation levels (seed i takes the (i mod n)th)."""
import os
import subprocess

import pytest

from randprog import generate
from test_btrace_patch import REGION, compare, ring_branches

pytestmark = pytest.mark.branchstub_only


def _seeds():
    spec = os.environ.get("BTRACE_FUZZ_SEEDS", "1-6")
    seeds = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        seeds += range(int(lo), int(hi or lo) + 1)
    return seeds


@pytest.mark.parametrize("seed", _seeds())
def test_random_program_same_history(procs, tmp_path, seed):
    opts = os.environ.get("BTRACE_FUZZ_OPTS", "-O0,-O1,-O2").split(",")
    opt = opts[seed % len(opts)]
    src = tmp_path / ("r%d.c" % seed)
    src.write_text(generate(seed))
    prog = str(tmp_path / ("r%d" % seed))
    subprocess.run(["gcc", "-g", opt, "-fno-omit-frame-pointer", "-w", "-o", prog, str(src)],
                   check=True, timeout=60)
    small_ring = seed % 4 == 0
    kw = dict(server_args=["--test-patch-ring=4096"]) if small_ring else {}
    soft, patch = compare(procs, prog, [], REGION, **kw)
    st = ring_branches(patch)
    assert st["patched"] > 0 and st["ring"] > 0, (seed, opt, st)
