"""Several inferiors in one extended-remote session, as GDB 13's gdb.multi tests drive them:
add-inferior, `set schedule-multiple on`, processes that exit or are killed while all run,
a threaded program run again beside a stopped one, and the terminal each launched program
gets. Each test is one cause of a gdb.multi line the server once lost."""
import fcntl
import os
import pty
import re
import subprocess
import termios

from harness import Reader, SERVER, _kill_proc, _extra_server_args, free_port, gdb_remote, inferior

BASIC = inferior("basic")
BPLOOP = inferior("bploop")
EXIT_THREADS = inferior("exit_threads")
TTY_USER = inferior("tty_user")

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

# Resumes every process; once none is stopped any more, SIGKILLs the first from outside, then
# each other one as soon as it leaves the running state (GDB's stop request, sent after the
# first kill is reported, races the kills as the testsuite's `kill -9 PID...` does), the rest
# after two seconds.
KILL_ALL_WHILE_RUNNING = r'''
import gdb, os, signal, threading, time

pids = [i.pid for i in gdb.inferiors() if i.pid]

def state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"

def kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass

def killer():
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(state(p) == "t" for p in pids):
        time.sleep(0.001)  # polls a condition (every process out of its ptrace stop)
    kill(pids[0])
    left = pids[1:]
    # The others once they stop, or all at once after a while (GDB may have stopped and
    # resumed them between two looks).
    late = time.monotonic() + 2
    while left and time.monotonic() < late:
        for p in [p for p in left if state(p) != "R"]:
            kill(p)
            left.remove(p)
        time.sleep(0)  # lets GDB's own Python run
    for p in left:
        kill(p)

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
    """Six spinning processes SIGKILLed from outside while all run: each kill is reported, one
    per continue, and GDB's inferior list stays right (gdb.multi/multi-kill.exp). GDB reads
    the registers of every thread it knows stopped before it resumes anything: a process it
    stopped and that is killed then answers with its stop's registers and tells its end once
    resumed (gdbserver), and one killed before its stop is told has no stop told (it would
    have no registers) but its end. Otherwise GDB fails with "Could not read registers" and
    goes no further (before: about one run in four here; the backend unit test forces it)."""
    n = 6
    srv = procs.server(["--multi", "{COMM}"])
    r = gdb_remote(srv, _start_each(BPLOOP, n, ("set args 9000000000000000000", "start")) + ["set schedule-multiple on"],
                   pre=NON_STOP_TARGET, extended=True, timeout=120, pyscript=KILL_ALL_WHILE_RUNNING + DRAIN)
    out = r.out
    assert "Stopping Thread" not in out, r
    assert "while the selected thread is running" not in out, r
    assert "PTRACE_GETREGS" not in out and "internal-error" not in out, r
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


class TtyServer:
    """The server with a pseudo-terminal as its controlling terminal and stdio, the way
    DejaGnu runs it (and a user in a shell): the programs it launches share that terminal."""

    def __init__(self, args):
        self.port = free_port()
        argv = [SERVER] + _extra_server_args(SERVER, args) + \
            [a.replace("{COMM}", "127.0.0.1:%d" % self.port) for a in args]
        master, slave = pty.openpty()
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
                                     preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
        os.close(slave)
        self.tty = Reader(os.fdopen(master, "rb", buffering=0))
        assert self.tty.wait_for(r"Listening on port", 30), self.tty.text

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        _kill_proc(self.proc)


def test_each_launched_program_gets_the_terminal(procs):
    """Each program the server launches runs in a process group of its own, made the
    foreground group of the server's terminal (gdbserver). Of two run in one session, the
    first is then in the background: using the terminal stops it with SIGTTOU, while the
    second uses it freely (gdb.multi/multi-term-settings.exp, run/run)."""
    srv = TtyServer(["--multi", "{COMM}"])
    procs.servers.append(srv)
    r = gdb_remote(srv, _start_each(TTY_USER, 2) + [
        "set schedule-multiple on", "continue", "info inferiors",
        "set schedule-multiple off", "inferior 2", "break tick if count == 20", "continue",
        "kill inferiors 1 2", "monitor exit"], extended=True, timeout=120)
    out = r.out
    assert re.search(r'Thread 1\.1 "tty_user" received signal SIGTTOU', out), (r, srv.tty.text)
    assert re.search(r'Thread 2\.1 "tty_user" hit Breakpoint [\d.]+, tick \(count=20\)', out), (r, srv.tty.text)
    assert "Thread 2.1 \"tty_user\" received signal SIGTTOU" not in out, r
    assert srv.tty.wait_for(r"pid \d+ count 19", 10), srv.tty.text
