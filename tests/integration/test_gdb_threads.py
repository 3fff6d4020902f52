"""8 threads: info threads, thread apply all bt, a breakpoint in the thread function."""
import re

from harness import gdb_remote, inferior

THREADS = inferior("threads")


def test_info_threads_and_thread_apply_all_bt(procs):
    srv = procs.server(["--once", "{COMM}", THREADS])
    r = gdb_remote(srv, ["break all_running", "continue", "info threads",
                         "thread apply all bt", "delete", "continue"], prog=THREADS)
    out = r.out
    info = out[out.index("Id   Target Id"):]
    rows = re.findall(r"^\*?\s+(\d+)\s+Thread ", info.split("\n\nThread ")[0], re.M)
    assert len(rows) == 9, r
    heads = re.findall(r"^Thread (\d+) \(Thread [0-9a-fx.]+ ", out, re.M)
    assert len(set(heads)) == 9, r
    assert len(re.findall(r" in worker \(arg=", out)) + len(re.findall(r"worker \(arg=", out)) >= 8, r
    assert re.search(r"all_running \(\) at", out), r
    assert re.search(r"\[Inferior 1 \(process \d+\) exited normally\]", out), r


def test_breakpoint_in_thread_function(procs):
    srv = procs.server(["--once", "{COMM}", THREADS])
    r = gdb_remote(srv, ["break thread_hit"] + ["continue"] * 9, prog=THREADS, timeout=90)
    out = r.out
    ids = re.findall(r"hit Breakpoint 1, thread_hit \(id=(\d)\)", out)
    assert sorted(ids) == [str(i) for i in range(8)], r
    assert re.search(r"\[Inferior 1 \(process \d+\) exited normally\]", out), r
