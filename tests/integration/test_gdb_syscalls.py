"""`catch syscall` with GDB 13 (QCatchSyscalls): entry and return stops, lists of syscalls,
threads (issue 2)."""
import re

from harness import gdb_remote, inferior

BRANCHES, THREADS = inferior("branches"), inferior("threads")


def test_catch_syscall_entry_return_and_list(procs):
    srv = procs.server(["--once", "{COMM}", BRANCHES])
    r = gdb_remote(srv, ["catch syscall getpid", "continue", "continue", "bt 3", "delete",
                         "catch syscall write exit_group", "continue", "continue"], prog=BRANCHES)
    out = r.out
    assert re.search(r"Catchpoint 1 \(call to syscall getpid\), .*getpid", out), r
    assert re.search(r"Catchpoint 1 \(returned from syscall getpid\)", out), r
    assert re.search(r"#1 +0x[0-9a-f]+ in region \(\)", out), r
    assert re.search(r"Catchpoint 2 \(call to syscall exit_group\)", out), r
    assert re.search(r"\[Inferior 1 \(process \d+\) exited normally\]", out), r


def test_catch_syscall_in_threads_then_off(procs):
    srv = procs.server(["--once", "{COMM}", THREADS])
    r = gdb_remote(srv, ["break main", "continue", "catch syscall clone3", "continue", "continue",
                         "delete", "continue"], prog=THREADS)
    out = r.out
    assert re.search(r"Catchpoint 2 \(call to syscall clone3\)", out), r
    assert re.search(r"Catchpoint 2 \(returned from syscall clone3\)", out), r
    # With the catchpoint gone the program runs to its end without another syscall stop.
    tail = out[out.rindex("returned from syscall clone3"):]
    assert "Catchpoint" not in tail.split("\n", 1)[1], r
    assert re.search(r"exited normally", out), r
