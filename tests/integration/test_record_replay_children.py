"""branchstub record / replay of a program that makes child processes (fork, kill, system(),
popen()) and talks over a socket pair (docs/record-replay.md, "Child processes"): the children
run unrecorded, at native speed; the replay makes none, and gives the parent what it got when
recorded: the children's pids, what they wrote into pipes, their exit statuses, the SIGCHLDs
(at their recorded branch counts), the socket's message, getresuid and a terminal setting's
result. Replayed twice under the real GDB, which sees the recorded values; `reverse-continue`
to a watchpoint goes back over the children's part to the write."""
import os
import re
import subprocess

import pytest

from harness import SERVER, gdb_remote, inferior

pytestmark = pytest.mark.branchstub_only

PROG = inferior("replay_children")
NAMES = ["child_pid", "child_text", "child_status", "killed_signal", "system_status", "popen_text",
         "popen_status", "socket_text", "tcset_result", "sigchld_count"]


def record(tmp_path, name="trace"):
    trace = tmp_path / name
    env = dict(os.environ, BRANCHSTUB_TRACE_DIR=str(tmp_path / "traces"))
    p = subprocess.run([SERVER, "record", "-o", str(trace), PROG], capture_output=True, timeout=60, env=env,
                       cwd=str(tmp_path), stdin=subprocess.DEVNULL)
    return p, trace


def printed(text):
    return dict(re.findall(r"^(\w+)=(.*)$", text, re.M))


def gdb_value(name, value):
    """What GDB prints for the program's value as printed by the program."""
    if name.endswith("_text"):
        return '"%s"' % value
    return value


def replay_and_compare(procs, trace, prog, names, rec, more):
    """Replays trace under GDB to values_ready(), where each name must print what the program
    printed when recorded, then to the end; returns what the `more` commands printed."""
    srv = procs.server(["replay", "--once", "{COMM}", str(trace)])
    cmds = ["break values_ready", "continue"] + ["print %s" % n for n in names] + more + ["continue", "continue"]
    r = gdb_remote(srv, cmds, prog=prog)
    got = re.findall(r"^\$\d+ = (.*)$", r.out, re.M)
    assert len(got) == len(names) + len(more), r
    for name, value in zip(names, got):
        assert value.startswith(gdb_value(name, rec[name])), (name, value, rec[name], r)
    assert "divergence" not in r.out and "divergence" not in srv.stderr.text, r
    assert "cannot run backwards" not in r.out and "Could not open" not in r.out, r
    return got[len(names):], r, srv


def test_children_run_unrecorded_and_the_parent_replays(procs, tmp_path):
    p, trace = record(tmp_path)
    err = p.stderr.decode()
    assert p.returncode == 0, err
    rec = printed(p.stdout.decode())
    # What the program got when recorded, natively: the children really ran.
    assert rec["child_text"] == "from-child-%s" % rec["child_pid"], rec
    assert rec["child_status"] == "7", rec  # the child's rdtsc ran untrapped
    assert rec["killed_signal"] == "15", rec
    assert rec["system_status"] == "3", rec
    assert rec["popen_text"] == "from-popen" and rec["popen_status"] == "0", rec
    assert rec["socket_text"] == "over-socket", rec
    assert rec["res_uid"] == ",".join([str(u) for u in os.getresuid()]), rec
    assert rec["tcset_result"] == "-1", rec  # stdin is /dev/null: ENOTTY
    assert int(rec["sigchld_count"]) >= 1, rec
    header = (trace / "header").read_text()
    assert "complete 1" in header and "exit 0" in header, header
    for _ in range(2):
        extra, r, srv = replay_and_compare(procs, trace, PROG, NAMES, rec, ["print res_uid"])
        assert extra == ["{%s}" % ", ".join(rec["res_uid"].split(","))], r
        assert re.search(r"exited normally|exited with code 0?0\]", r.out), r
        # No child ran in the replay: neither the program's output nor popen's shell's again.
        assert "from-popen" not in srv.stdout.text and "child_pid=" not in srv.stdout.text, srv.stdout.text


@pytest.mark.parametrize("watchpoints", ["auto", "software"])
def test_reverse_continue_over_the_children(procs, tmp_path, watchpoints):
    """Emulated watchpoints (software: on every host) run the reverse passes as checked steps:
    the replay's own int3 at a place to go back to must go in at once then (no ring's budget
    stops the thread short of it); and GDB, back at the start, reads libc again from the
    restarted replay's file system."""
    p, trace = record(tmp_path)
    assert p.returncode == 0, p.stderr
    rec = printed(p.stdout.decode())
    want = int(rec["child_pid"]) + int(rec["child_status"])
    srv = procs.server(["replay", "--once", "--watchpoints=" + watchpoints, "{COMM}", str(trace)])
    r = gdb_remote(srv, ["break values_ready", "continue", "watch after_children", "reverse-continue",
                         "print child_pid", "print sigchld_count", "reverse-continue", "continue"],
                   prog=PROG, timeout=120)
    assert re.search(r"Old value = %d\s+New value = 0" % want, r.out), r  # reverse: new is the older
    assert "$1 = %s" % rec["child_pid"] in r.out, r
    assert "$2 = %s" % rec["sigchld_count"] in r.out, r
    # Back to the start of the recording: the write before it did not happen.
    assert "No more reverse-execution history." in r.out, r
    assert "divergence" not in r.out and "divergence" not in srv.stderr.text, r
    assert "cannot run backwards" not in r.out and "Could not open" not in r.out, r


DESCRIPTORS = inferior("replay_descriptors")
DESCRIPTOR_NAMES = ["port", "accepted_fd", "tcp_text", "epoll_ready", "event_value", "timer_armed", "file_fd",
                    "file_text"]


def test_network_sockets_epoll_eventfd_timerfd_replay_as_placeholders(procs, tmp_path):
    """A loopback TCP connection, epoll, eventfd and timerfd are recorded; the replay opens
    /dev/null in their place (the same numbers) and gives back what went through them."""
    f = tmp_path / "input.txt"
    f.write_text("after-placeholders\n")
    trace = tmp_path / "trace"
    env = dict(os.environ, BRANCHSTUB_TRACE_DIR=str(tmp_path / "traces"))
    p = subprocess.run([SERVER, "record", "-o", str(trace), DESCRIPTORS, str(f)], capture_output=True, timeout=60,
                       env=env, cwd=str(tmp_path), stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr.decode()
    rec = printed(p.stdout.decode())
    assert rec["tcp_text"] == "over-tcp" and rec["epoll_ready"] == "77", rec
    assert rec["event_value"] == "41" and rec["timer_armed"] == "1", rec
    assert rec["file_text"] == "after-placeholders", rec
    f.write_text("changed\n")
    for _ in range(2):
        extra, r, _ = replay_and_compare(procs, trace, DESCRIPTORS, DESCRIPTOR_NAMES, rec,
                                         ["print (int) fcntl(accepted_fd, 1)"])
        # The placeholder is a real descriptor in the replay (GDB's call runs on it: F_GETFD).
        assert extra in (["0"], ["1"]), r


@pytest.mark.parametrize("argv", [
    ["/bin/cp", "{dir}/input.txt", "{dir}/copy.txt"],   # ioctl FICLONE, copy_file_range
    ["/usr/bin/id"],                                    # getgroups
    ["/bin/ps", "-o", "pid,comm", "-p", "1"],           # get/set_mempolicy
    ["/bin/bash", "-c", "echo piped | /bin/cat; exit 5"],  # fork + exec in the child, wait4
    ["/usr/bin/env", "sort", "-r", "{dir}/input.txt"],  # exec after a PATH search's misses
    ["/bin/bash", "-c", "exec /bin/echo exec-ed"],      # exec of the recorded program itself
    ["/usr/bin/nice", "-n", "1", "/bin/true"],          # getpriority/setpriority, exec
    ["/usr/bin/gcc", "-c", "{dir}/t.c", "-o", "{dir}/t.o"],  # prlimit64 raising its stack, cc1 and as
    ["/usr/bin/python3", "-c", "import sqlite3; c = sqlite3.connect('{dir}/db'); c.execute('create table t(x)');"
     " c.execute('insert into t values(1)'); c.commit(); print(c.execute('select count(*) from t').fetchone())"],
    ["/usr/bin/timeout", "5", "/bin/sh", "-c", "exit 3"],  # a POSIX timer, a child, its status
    # The same, its child slower than its first waitpid(WNOHANG): it waits in rt_sigsuspend for
    # the SIGCHLD (refused before; under load the fast case above sometimes waited there too).
    ["/usr/bin/timeout", "5", "/bin/sh", "-c", "sleep 0.2; exit 3"],
], ids=["cp", "id", "ps", "bash-pipeline", "env-path-search", "bash-exec", "nice", "gcc", "sqlite", "timeout",
        "timeout-sigsuspend"])
def test_everyday_programs_record_and_replay_to_their_end(procs, tmp_path, argv):
    (tmp_path / "input.txt").write_text("copied\n")
    (tmp_path / "t.c").write_text("int main(void) { return 0; }\n")
    argv = [a.replace("{dir}", str(tmp_path)) for a in argv]
    trace = tmp_path / "trace"
    env = dict(os.environ, BRANCHSTUB_TRACE_DIR=str(tmp_path / "traces"))
    p = subprocess.run([SERVER, "record", "-o", str(trace)] + argv, capture_output=True, timeout=60, env=env,
                       cwd=str(tmp_path), stdin=subprocess.DEVNULL)
    for made in ("db", "t.o"):  # the native run starts from the same files
        (tmp_path / made).unlink(missing_ok=True)
    native = subprocess.run(argv, capture_output=True, timeout=60, cwd=str(tmp_path), stdin=subprocess.DEVNULL)
    assert p.returncode == native.returncode, p.stderr.decode()
    assert b"refused" not in p.stderr, p.stderr.decode()
    srv = procs.server(["replay", "--once", "{COMM}", str(trace)])
    r = gdb_remote(srv, ["continue", "continue"], prog=argv[0])
    assert "divergence" not in r.out and "divergence" not in srv.stderr.text, r
    if argv[0] in ("/usr/bin/env", "/usr/bin/nice") or "exec " in argv[-1]:
        # The replay loads the new image as the recording did, and GDB follows it.
        assert re.search(r"process \d+ is executing new program: \S+/(sort|echo|true)", r.out), r
    if native.returncode == 0:
        assert "exited normally" in r.out, r
    else:
        assert re.search(r"exited with code 0?%o\]" % native.returncode, r.out), r


def test_an_interactive_shell_on_a_terminal_records_and_replays(procs, tmp_path):
    """Run from a terminal (script(1) gives it a pty), an interactive bash does job control:
    tcsetpgrp, setpgid, terminal settings around a pipeline of children. Recorded there, it
    replays to its end (no terminal needed: those calls are emulated)."""
    trace = tmp_path / "trace"
    env = dict(os.environ, BRANCHSTUB_TRACE_DIR=str(tmp_path / "traces"))
    inner = "%s record -o %s /bin/bash --norc -ic 'echo hi; ls / | wc -l; exit 4'" % (SERVER, trace)
    p = subprocess.run(["script", "-qec", inner, "/dev/null"], capture_output=True, timeout=60, env=env,
                       cwd=str(tmp_path), stdin=subprocess.DEVNULL)
    out = p.stdout.decode(errors="replace")
    assert p.returncode == 4 and "refused" not in out, out
    srv = procs.server(["replay", "--once", "{COMM}", str(trace)])
    r = gdb_remote(srv, ["continue", "continue"], prog="/bin/bash")
    assert "divergence" not in r.out and "divergence" not in srv.stderr.text, r
    assert re.search(r"exited with code 0?4\]", r.out), r
