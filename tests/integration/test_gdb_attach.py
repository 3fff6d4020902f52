"""`SERVER --attach COMM PID`, then detach: the process keeps running, unharmed."""
import re

from harness import gdb_remote, inferior, proc_state, RUNNING_STATES, wait_heartbeat

SLEEPER = inferior("sleeper")


def test_attach_detach(procs, heartbeat):
    sleeper, pid = procs.spawn_sleeper(heartbeat)
    srv = procs.server(["--attach", "{COMM}", str(pid)])
    r = gdb_remote(srv, ["bt", "print loop_counter > 0", "break tick", "continue",
                         "print n == loop_counter", "delete", "detach"], prog=SLEEPER)
    out = r.out
    assert re.search(r"#\d+ +0x[0-9a-f]+ in main \(", out), r
    assert re.search(r"\$1 = 1\b", out), r
    assert re.search(r"Breakpoint 1, tick \(n=\d+\)", out), r
    assert re.search(r"\$2 = 1\b", out), r
    assert re.search(r"\[Inferior 1 \(process %d\) detached\]" % pid, out), r
    first = wait_heartbeat(heartbeat)
    wait_heartbeat(heartbeat, after=first)
    assert sleeper.poll() is None and proc_state(pid) in RUNNING_STATES, proc_state(pid)
    assert srv.wait_exit(10) is not None, "server did not exit after the detach"
