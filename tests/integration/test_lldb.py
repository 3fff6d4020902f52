"""LLDB as a client, with `gdb-remote` and no `target create` first: every test runs with
LLDB 16 ([lldb], or BRANCHSTUB_LLDB) and with LLDB 19 ([lldb19], unpacked beside it by
scripts/lldb-beside.sh 19)."""
import re

import pytest

from harness import inferior, line_of, lldb, proc_state, RUNNING_STATES, wait_heartbeat, watch_args

BASIC = inferior("basic")


def test_lldb_attach_registers_detach(procs, heartbeat, lldb_bin):
    """Works with gdbserver too: attach, registers, threads, detach."""
    sleeper, pid = procs.spawn_sleeper(heartbeat)
    srv = procs.server(["--attach", "{COMM}", str(pid)])
    r = lldb(["gdb-remote 127.0.0.1:%d" % srv.port, "register read rip xmm0 ymm0",
              "thread list", "process detach"], binary=lldb_bin)
    out = r.out
    assert re.search(r"Process %d stopped" % pid, out), r
    assert re.search(r"^\s+rip = 0x[0-9a-f]{16}", out, re.M), r
    assert re.search(r"^\s+xmm0 = \{(0x[0-9a-f]{2} ?){16}\}", out, re.M), r
    assert re.search(r"^\s+ymm0 = \{(0x[0-9a-f]{2} ?){32}\}", out, re.M), r
    # LLDB prints tids in decimal once it knows the target is Linux (qHostInfo), in hex otherwise.
    assert re.search(r"thread #1: tid = (0x%x|%d)\b" % (pid, pid), out), r
    assert re.search(r"Process %d detached" % pid, out), r
    first = wait_heartbeat(heartbeat)
    wait_heartbeat(heartbeat, after=first)
    assert proc_state(pid) in RUNNING_STATES


@pytest.mark.branchstub_only
def test_lldb_full_session(procs, watch_mode, lldb_bin):
    """Breakpoint shown as a breakpoint (gdbserver reports SIGTRAP at bp+1 to LLDB), bt,
    registers, libc in `image list`, si/next/finish, a watchpoint on a global (emulated, and
    with debug registers where they trap), process kill."""
    srv = procs.server(watch_args(watch_mode) + ["--once", "{COMM}", BASIC])
    r = lldb(["gdb-remote 127.0.0.1:%d" % srv.port,
              "b compute", "c", "bt", "register read rip xmm0 ymm0", "image list",
              "si", "next", "finish",
              "watchpoint set variable counter", "breakpoint delete 1", "c",
              "process kill"], timeout=90, binary=lldb_bin)
    out = r.out
    assert re.search(r"Breakpoint 1: where = basic`compute \+ \d+ at basic\.c:\d+", out), r
    assert re.search(r"stop reason = breakpoint 1\.1", out), r
    # The initial stop at the loader's entry is a real SIGTRAP (exec); after it, every stop
    # must have its true reason, never a SIGTRAP at bp+1.
    after_first_stop = out.split("(lldb) b compute", 1)[-1]
    assert "SIGTRAP" not in after_first_stop, r
    assert re.search(r"frame #0: 0x[0-9a-f]+ basic`compute\(x=0\) at basic\.c:\d+", out), r
    assert re.search(r"frame #1: 0x[0-9a-f]+ basic`main at basic\.c:%d" % line_of("basic", "loop-body"), out), r
    assert re.search(r"frame #2: 0x[0-9a-f]+ libc\.so\.6`", out), r        # bt through libc
    assert re.search(r"libc\.so\.6", out), r
    assert re.search(r"^\s+rip = 0x[0-9a-f]{16}\s+basic`compute", out, re.M), r
    assert re.search(r"^\s+xmm0 = \{", out, re.M), r
    assert re.search(r"^\s+ymm0 = \{", out, re.M), r
    assert re.search(r"stop reason = instruction step into", out), r
    assert re.search(r"stop reason = step over", out), r
    assert re.search(r"stop reason = step out", out), r
    assert re.search(r"Watchpoint created: Watchpoint 1: addr = 0x[0-9a-f]+ size = 4", out), r
    assert re.search(r"stop reason = watchpoint 1", out), r
    assert re.search(r"Watchpoint 1 hit:\s+old value: 1\s+new value: 2", out), r
    assert re.search(r"Return value: \(int\) \$0 = 1", out), r
    assert re.search(r"Process \d+ exited with status = 9", out), r
    assert srv.wait_exit(10) is not None


@pytest.mark.branchstub_only
def test_lldb_signals_in_linux_numbering(procs, lldb_bin):
    """LLDB reads stop signals as Linux numbers (GDB's numbering would show SIGUSR1 as
    SIGPWR), and the signals it passes back reach the program: 3 handler runs."""
    sig = inferior("signals")
    srv = procs.server(["--once", "{COMM}", sig])
    r = lldb(["gdb-remote 127.0.0.1:%d" % srv.port, "c"], timeout=90, binary=lldb_bin)
    assert re.search(r"stop reason = signal SIGUSR1", r.out), r
    assert "SIGPWR" not in r.out, r
    srv2 = procs.server(["--once", "{COMM}", sig])
    r2 = lldb(["gdb-remote 127.0.0.1:%d" % srv2.port,
               "process handle SIGUSR1 -s false -p true -n true", "c"], timeout=90, binary=lldb_bin)
    assert len(re.findall(r"received signal: SIGUSR1", r2.out)) == 3, r2
    assert re.search(r"exited with status = 3\b", r2.out), r2


@pytest.mark.branchstub_only
def test_lldb_variables_step_in_memory_watch_btrace(procs, lldb_bin):
    """What an LLDB user does at a source breakpoint: frame variables (arrays too), step in,
    bt, step over, memory read, a write watchpoint, and branch history through
    `process plugin packet monitor btrace` (recording across the steps and the watchpoint)."""
    srv = procs.server(["--once", "{COMM}", BASIC])
    loop = line_of("basic", "loop-body")
    r = lldb(["gdb-remote 127.0.0.1:%d" % srv.port,
              "b basic.c:%d" % loop, "c", "frame variable",
              "process plugin packet monitor btrace start",
              "s", "bt", "next", "frame variable x doubled",
              "memory read --size 4 --format x --count 1 &counter",
              "memory read --size 4 --format d --count 1 &global_value",
              "watchpoint set variable -w write counter", "breakpoint delete 1", "c",
              "watchpoint delete 1",
              "process plugin packet monitor btrace calls 10",
              "process plugin packet monitor btrace history 10",
              "process kill"], timeout=90, binary=lldb_bin)
    out = r.out
    assert re.search(r"Breakpoint 1: where = basic`main \+ \d+ at basic\.c:%d" % loop, out), r
    assert re.search(r"stop reason = breakpoint 1\.1", out), r
    assert re.search(r"^\(int\) local_sum = 0$", out, re.M), r
    assert re.search(r"^\(int\[4\]\) values = \(\[0\] = 4, \[1\] = 2, \[2\] = 3, \[3\] = 1\)$", out, re.M), r
    assert re.search(r"^\(int\) i = 0$", out, re.M), r
    assert re.search(r"Recording branches of thread \d+", out), r
    # step in: into compute, called from main's loop line
    assert re.search(r"stop reason = step in\n\s+frame #0: 0x[0-9a-f]+ basic`compute\(x=0\) at basic\.c:%d"
                     % line_of("basic", "compute-body"), out), r
    assert re.search(r"frame #1: 0x[0-9a-f]+ basic`main at basic\.c:%d" % loop, out), r
    assert re.search(r"stop reason = step over\n\s+frame #0: 0x[0-9a-f]+ basic`compute\(x=0\) at basic\.c:%d"
                     % line_of("basic", "counter-inc"), out), r
    assert re.search(r"^\(int\) x = 0\n\(int\) doubled = 0$", out, re.M), r
    assert re.search(r"^0x[0-9a-f]+: 0x00000000$", out, re.M), r            # counter, not yet incremented
    assert re.search(r"^0x[0-9a-f]+: 42$", out, re.M), r                    # global_value
    assert re.search(r"Watchpoint created: Watchpoint 1: addr = 0x[0-9a-f]+ size = 4 state = enabled type = w", out), r
    assert re.search(r"stop reason = watchpoint 1", out), r
    assert re.search(r"Watchpoint 1 hit:\s+old value: 0\s+new value: 1", out), r
    # (LLDB's `&counter` calls mmap in the program to evaluate it: its return to _start is
    # in the history too, as it ran.)
    calls = out[out.index("monitor btrace calls 10"):out.index("monitor btrace history 10")]
    assert re.search(r"^ +1\t +compute$", calls, re.M), r
    history = out[out.index("monitor btrace history 10"):]
    assert re.search(r"^branch 0x[0-9a-f]+ <main\+0x[0-9a-f]+> -> 0x[0-9a-f]+ <compute>$", history, re.M), r
    assert re.search(r"Process \d+ exited with status = 9", out), r
    assert srv.wait_exit(10) is not None
