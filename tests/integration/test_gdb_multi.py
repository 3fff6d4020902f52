"""Several inferiors in one extended-remote session, as GDB 13's gdb.multi tests drive them:
add-inferior, `set schedule-multiple on`, processes that exit or are killed while all run,
a threaded program run again beside a stopped one, and the terminal each launched program
gets. Each test is one cause of a gdb.multi line the server once lost."""
import re

from harness import gdb_remote, inferior

BASIC = inferior("basic")
SLEEPER = inferior("sleeper")
EXIT_THREADS = inferior("exit_threads")

# GDB stops every thread it believes runs when one process exits (all-stop on top of a
# non-stop target, as gdb.multi/multi-exit.exp and multi-kill.exp run it).
NON_STOP_TARGET = ["maint set target-non-stop on"]


def _start_each(prog, n, stop=("start",)):
    """Inferiors 1..n, each running `prog` and stopped by `stop` (commands)."""
    cmds = []
    for i in range(1, n + 1):
        if i > 1:
            cmds += ["add-inferior", "inferior %d" % i]
        cmds += ["file " + prog, "set remote exec-file " + prog] + list(stop)
    return cmds


# Until no inferior has a process: switch to a live one and continue (multi-exit.exp's loop).
# Errors are printed, not raised, so that the loop and the checks go on.
DRAIN = r'''
import gdb

def live():
    return [i.num for i in gdb.inferiors() if i.pid]

for _ in range(len(gdb.inferiors()) + 2):
    nums = live()
    print("LIVE %s" % nums)
    if not nums:
        break
    for cmd in ("inferior %d" % nums[0], "continue"):
        try:
            gdb.execute(cmd)
        except gdb.error as e:
            print("GDB-ERROR %s" % e)
'''

# Resumes every process and SIGKILLs them all from outside once none is stopped any more.
KILL_ALL_WHILE_RUNNING = r'''
import gdb, os, signal, threading, time

pids = [i.pid for i in gdb.inferiors() if i.pid]

def state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"

def killer():
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(state(p) == "t" for p in pids):
        time.sleep(0.001)  # polls a condition (every process out of its ptrace stop)
    for p in pids:
        os.kill(p, signal.SIGKILL)

threading.Thread(target=killer, daemon=True).start()
try:
    gdb.execute("continue")
except gdb.error as e:
    print("GDB-ERROR %s" % e)
'''


def test_processes_exiting_while_all_run_each_reported(procs):
    """Six processes resumed together exit at nearly the same time. After the first exit GDB
    stops the threads it believes run, those of processes whose exits still wait in the
    notification queue too: the server must take that vCont;t (gdbserver answers OK), and
    every later continue reports one more exit (gdb.multi/multi-exit.exp)."""
    n = 6
    srv = procs.server(["--multi", "{COMM}"])
    r = gdb_remote(srv, _start_each(BASIC, n) + ["set schedule-multiple on"], pre=NON_STOP_TARGET,
                   extended=True, timeout=120, pyscript=DRAIN)
    out = r.out
    assert "Stopping Thread" not in out, r
    assert "while the selected thread is running" not in out, r
    exited = re.findall(r"\[Inferior (\d+) \(process \d+\) exited with code 07\]", out)
    assert sorted(map(int, exited)) == list(range(1, n + 1)), r
    assert "LIVE []" in out, r


def test_processes_killed_from_outside_while_all_run(procs):
    """Six running processes SIGKILLed from outside at once: each kill is reported, one per
    continue, and GDB's inferior list stays right (gdb.multi/multi-kill.exp)."""
    n = 6
    srv = procs.server(["--multi", "{COMM}"])
    r = gdb_remote(srv, _start_each(SLEEPER, n) + ["set schedule-multiple on"], pre=NON_STOP_TARGET, extended=True, timeout=120, pyscript=KILL_ALL_WHILE_RUNNING + DRAIN)
    out = r.out
    assert "Stopping Thread" not in out, r
    assert "while the selected thread is running" not in out, r
    assert len(re.findall(r"Program terminated with signal SIGKILL", out)) == n, r
    assert "LIVE []" in out, r


def test_threaded_program_run_again_beside_a_stopped_one(procs):
    """A program whose main returns while its other threads are stopped, run to its end again
    and again while another inferior stays stopped (gdb.multi/multi-re-run.exp). Its exit
    kills those threads before the server resumes them; they still count as running until
    their exits come, so the exit is reported, never "no resumed" ("No unwaited-for children
    left.")."""
    runs = 8
    srv = procs.server(["--multi", "{COMM}"])
    stop = ("break all_started", "run")
    cmds = _start_each(EXIT_THREADS, 2, stop)
    for _ in range(runs - 1):
        cmds += ["continue", "run"]
    cmds += ["continue", "info inferiors", "monitor exit"]
    r = gdb_remote(srv, cmds, extended=True, timeout=180)
    out = r.out
    assert "No unwaited-for children left" not in out, r
    assert len(re.findall(r"\[Inferior 2 \(process \d+\) exited normally\]", out)) == runs, r
    assert re.search(r"^  1 +process \d+ ", out, re.M), r
