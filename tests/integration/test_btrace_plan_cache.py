"""The block-patching source's warm plan (issue 30; backend/btrace/patch/plan_cache.h): a
recording keeps, per module file, the block starts its exploration had to stop for, and the next
recording of the same files explores them at its first stop in each module. What is checked,
through GDB and `monitor btrace status`: the second run stops far less for exploration, both
runs give the software source's history line by line, a damaged plan costs nothing but its
wrong entries (dropped, the file written anew), and `--plan-cache=off` keeps nothing."""
import os
import re
import struct

import pytest

from harness import gdb_remote, inferior
from test_btrace_patch import REGION, normalized, ring_branches, session

pytestmark = pytest.mark.branchstub_only


def plan_status(out):
    m = re.search(r"(\d+) unknown ret/indirect targets.* (\d+) frontier traps, (\d+) stops at int3 sites.*?; "
                  r"plan cache: (\d+) block starts explored ahead, (\d+) dropped, (\d+) learned", out)
    assert m, "no plan status in:\n" + out[-3000:]
    keys = ("unknown", "frontier", "int3", "ahead", "dropped", "learned")
    return dict(zip(keys, map(int, m.groups())))


def same(a, b, what):
    if normalized(a) != normalized(b):
        import difflib
        diff = "\n".join(list(difflib.unified_diff(normalized(a), normalized(b), "soft", what, lineterm=""))[:80])
        raise AssertionError("%s differs from the software source:\n%s" % (what, diff))


def plans(directory):
    return sorted(os.path.join(directory, f) for f in os.listdir(directory) if f.endswith(".plan"))


def test_a_second_recording_starts_from_the_first_ones_plan(procs, tmp_path):
    prog = inferior("patchlibs")
    cache = str(tmp_path / "plans")
    soft = session(procs, "soft", prog, ["30"], REGION)
    assert "Recorded" in soft, soft[-3000:]

    cold = session(procs, "patch", prog, ["30"], REGION, server_args=["--plan-cache=" + cache])
    same(soft, cold, "first run")
    first = plan_status(cold)
    assert first["ahead"] == 0 and first["learned"] > 10, first
    # one file per module the run explored: the program, libc, the loader at least... and
    # each names its module by build id
    files = plans(cache)
    assert len(files) >= 2, files
    assert all(os.path.basename(f).startswith(("b", "f")) for f in files), files

    warm = session(procs, "patch", prog, ["30"], REGION, server_args=["--plan-cache=" + cache])
    same(soft, warm, "second run")
    second = plan_status(warm)
    assert second["ahead"] >= first["learned"] // 2, (first, second)
    assert second["dropped"] == 0, second
    # the stops exploration cost: frontier traps and unknown targets, mostly gone
    assert second["frontier"] + second["unknown"] < (first["frontier"] + first["unknown"]) // 3, (first, second)
    # The plan holds what ran (not only where exploration stopped), so a warm run explores
    # only around it: fewer block ends planned than the first run's deep exploration.
    assert ring_branches(warm)["patched"] < ring_branches(cold)["patched"] * 9 // 10, \
        (ring_branches(cold), ring_branches(warm))
    third = session(procs, "patch", prog, ["30"], REGION, server_args=["--plan-cache=" + cache])
    same(soft, third, "third run")
    assert plan_status(third)["frontier"] <= second["frontier"], (second, plan_status(third))


def test_a_damaged_plan_costs_only_its_wrong_entries(procs, tmp_path):
    prog = inferior("patchlibs")
    cache = str(tmp_path / "plans")
    soft = session(procs, "soft", prog, ["30"], REGION)
    session(procs, "patch", prog, ["30"], REGION, server_args=["--plan-cache=" + cache])
    # Every block start moved one byte on (into its first instruction, or onto another start
    # whose block does not end there): decoded again, none may be planned.
    damaged = 0
    for path in plans(cache):
        with open(path, "rb") as f:
            data = bytearray(f.read())
        count = struct.unpack_from("<I", data, 24)[0]
        for i in range(count):
            start, end = struct.unpack_from("<II", data, 32 + 8 * i)
            if start < end:
                struct.pack_into("<I", data, 32 + 8 * i, start + 1)
                damaged += 1
        with open(path, "wb") as f:
            f.write(data)
    assert damaged > 10

    out = session(procs, "patch", prog, ["30"], REGION, server_args=["--plan-cache=" + cache])
    same(soft, out, "run with a damaged plan")
    st = plan_status(out)
    assert st["dropped"] > 0, st
    # the file was written anew without them: the next run drops none
    again = session(procs, "patch", prog, ["30"], REGION, server_args=["--plan-cache=" + cache])
    same(soft, again, "run after the damaged plan")
    st2 = plan_status(again)
    assert st2["dropped"] == 0 and st2["ahead"] > 0, (st, st2)

    # Garbage instead of a plan: ignored.
    for path in plans(cache):
        with open(path, "wb") as f:
            f.write(b"BSPLAN01" + os.urandom(100))
    out = session(procs, "patch", prog, ["30"], REGION, server_args=["--plan-cache=" + cache])
    same(soft, out, "run with garbage plans")
    assert plan_status(out)["ahead"] == 0


def test_plan_cache_off_keeps_nothing(procs, tmp_path):
    """Off: nothing in the user's cache directory (where plans go by default), nothing learned."""
    prog = inferior("patchlibs")
    xdg = tmp_path / "xdg"
    env = dict(os.environ, XDG_CACHE_HOME=str(xdg))
    for option, kept in (("--plan-cache=off", False), ("--plan-cache=" + str(xdg / "branchstub" / "plans"), True)):
        srv = procs.server(["--btrace-source=patch", option, "--once", "{COMM}", prog, "3"], env=env)
        out = gdb_remote(srv, REGION + ["monitor btrace status", "kill"], prog=prog, timeout=180).out
        assert ("plan cache off" in out) == (not kept), out[-3000:]
        srv.wait_exit()
        assert bool(list(xdg.glob("branchstub/plans/*.plan"))) == kept, (option, out[-3000:])


@pytest.mark.parametrize("program", ["patchlibs", "ls"])
def test_a_whole_run_from_the_loader_teaches_the_next_one_what_ran(procs, tmp_path, program):
    """Recorded from the loader's first instruction to exit_group, where GDB leaves and the
    server ends the program (every module goes at once, as `bench/whole_run_bench.py` ends
    its runs): the plan still keeps the blocks that ran, so the next run explores
    around them only (fewer block ends planned) and rarely meets a frontier trap."""
    # ls -l /etc loads more libraries (libselinux, libpcre2): its plan was once kept only
    # where exploration stopped (the blocks that ran were lost with the modules at the end)
    prog, args = (inferior("patchlibs"), ["30"]) if program == "patchlibs" else ("/bin/ls", ["-l", "/etc"])
    cache = str(tmp_path / "plans")
    cmds = ["record btrace", "catch syscall exit_group", "continue", "monitor btrace status"]

    def run():  # GDB leaves without a kill: the server ends the program it launched
        srv = procs.server(["--btrace-source=patch", "--plan-cache=" + cache, "--once", "{COMM}", prog] + args)
        out = gdb_remote(srv, cmds, prog=prog, timeout=180).out
        srv.wait_exit(20)
        return out
    cold, warm = run(), run()
    for out in (cold, warm):
        assert "call to syscall exit_group" in out, out[-3000:]
    c, w = ring_branches(cold), ring_branches(warm)
    first, second = plan_status(cold), plan_status(warm)
    assert w["patched"] < c["patched"] * 9 // 10, (c, w)
    assert second["frontier"] <= max(10, first["frontier"] // 4), (first, second)
