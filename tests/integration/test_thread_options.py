"""QThreadOptions (GDB 15): clone and exit events of the threads GDB names, replayed byte for
byte as GDB 15 sends them, against the real server and a real threaded program, in all-stop
and non-stop. (Debian's GDB 13 never sends the packet, so a raw client stands in for GDB 15.)

Where the packets come from (bminor/binutils-gdb, gdb-15.1-release):
  - gdb/remote.c remote_query_supported(): the qSupported offer below (x86-64: xmlRegisters=i386
    last), GDB_OFFER.
  - gdb/remote.c commit_requested_thread_options(), called before every resume (all-stop: from
    remote_target::resume; non-stop: from commit_resumed): "QThreadOptions;0" clears every
    thread, then ";<options hex>:<ptid>" for each thread with options. gdb/infrun.c gives a
    thread GDB_THREAD_OPTION_CLONE | GDB_THREAD_OPTION_EXIT (3) while it steps over a
    breakpoint (so a clone syscall under a breakpoint is followed correctly); here main is that
    thread, and each new thread gets 3 once GDB has followed it (remote_target::follow_clone).
  - gdb/remote.c remote_resume_with_vcont()/append_resumption(): all-stop resumes the process
    as "vCont;c:p<pid>.-1" (multiprocess, scope = the inferior); commit_resumed() in non-stop
    sends the global wildcard "vCont;c" and acks each %Stop notification with "vStopped"
    (remote_notif_stop_ack) until "OK".
The replies are gdbserver 15's: qSupported lists "QThreadOptions=3" (server.cc,
handle_query), the clone stop is "T05clone:<new ptid>;<regs>;thread:<parent>;core:..;" and a
thread exit "w<status hex>;<ptid>" (remote-utils.cc prepare_resume_reply).

The program (tests/inferiors/clone_exit.c) starts two threads one after the other and exits 3;
each thread's exit is reaped (so told) before main goes on.
"""
import re
import time

import pytest

from harness import RSP, inferior, rle_decode

PROG = inferior("clone_exit")

GDB_OFFER = ("qSupported:multiprocess+;swbreak+;hwbreak+;qRelocInsn+;fork-events+;vfork-events+;"
             "exec-events+;vContSupported+;QThreadEvents+;QThreadOptions+;no-resumed+;"
             "memory-tagging+;xmlRegisters=i386")


class NotifyingRSP(RSP):
    """The raw client plus non-stop notifications: "%Stop:...#cs" packets are kept apart
    from the replies (no ack either way, as in the protocol)."""

    def __init__(self, port, **kw):
        super().__init__(port, **kw)
        self.notes = []

    def _take(self):
        """The next whole packet or notification in the buffer: (kind, payload) or None."""
        starts = [i for i in (self.buf.find(b"$"), self.buf.find(b"%")) if i >= 0]
        if not starts:
            return None
        start = min(starts)
        end = self.buf.find(b"#", start)
        if end < 0 or len(self.buf) < end + 3:
            return None
        kind, payload = self.buf[start:start + 1], self.buf[start + 1:end]
        self.buf = self.buf[end + 3:]
        if kind == b"$" and self.ack:
            self.send_raw(b"+")
        return kind, rle_decode(payload)

    def recv_packet(self, timeout=None):
        deadline = self._deadline(timeout)
        while True:
            got = self._take()
            if got and got[0] == b"%":
                self.notes.append(got[1])
            elif got:
                return got[1]
            else:
                self._fill(deadline)

    def recv_notification(self, timeout=None):
        """The next %Stop notification's stop reply (without "Stop:")."""
        deadline = self._deadline(timeout)
        while not self.notes:
            got = self._take()
            if got and got[0] == b"$":
                raise AssertionError("reply %r where a notification was awaited" % got[1])
            if got:
                self.notes.append(got[1])
            else:
                self._fill(deadline)
        note = self.notes.pop(0)
        assert note.startswith(b"Stop:"), note
        return note[len(b"Stop:"):]

    def _deadline(self, timeout):
        return time.monotonic() + (timeout or self.timeout)


def connect(srv):
    c = NotifyingRSP(srv.port)
    c.send_raw(b"+")
    sup = c.request(GDB_OFFER)
    if b"QThreadOptions=" not in sup:
        c.send_raw(b"$k#6b")   # the launched program goes with the server
        c.close()
        pytest.skip("the server does not serve QThreadOptions (gdbserver before 15)")
    assert b";QThreadOptions=3;" in sup, sup   # gdbserver's mask: clone (1) | exit (2)
    assert c.request("QStartNoAckMode") == b"OK"
    c.ack = False
    return c


def options_for(pid, threads):
    """GDB 15's packet: every thread cleared, then 3 for each thread in `threads`."""
    return "QThreadOptions;0" + "".join(";3:p%x.%x" % (pid, t) for t in threads)


def clone_of(reply, pid, parent):
    """The new thread of a gdbserver-style clone stop reported by `parent`, checked whole."""
    m = re.fullmatch(rb"T05clone:p%x\.([0-9a-f]+);06:[0-9a-f]{16};07:[0-9a-f]{16};10:[0-9a-f]{16};"
                     rb"thread:p%x\.%x;core:[0-9a-f]+;" % (pid, pid, parent), reply)
    assert m, reply
    return int(m.group(1), 16)


def task_state(pid, tid):
    try:
        with open("/proc/%d/task/%d/stat" % (pid, tid)) as f:
            data = f.read()
        return data[data.rindex(")") + 2]
    except (OSError, ValueError):
        return None


def check_new_thread_held(c, pid, child):
    # Left stopped, never run (gdbserver: last_resume_kind = resume_stop) ...
    assert task_state(pid, child) == "t"
    # ... and out of qXfer:threads until its parent runs on (gdbserver's
    # handle_qxfer_threads_worker skips a thread with a pending clone parent).
    threads = c.request("qXfer:threads:read::0,fff")
    assert b"p%x.%x\"" % (pid, pid) in threads, threads
    assert b"p%x.%x\"" % (pid, child) not in threads, threads


def test_all_stop_clone_and_exit_events(procs):
    srv = procs.server(["--once", "{COMM}", PROG])
    c = connect(srv)
    stop = c.request("?")
    m = re.match(rb"T05.*thread:p([0-9a-f]+)\.([0-9a-f]+);", stop)
    assert m and m.group(1) == m.group(2), stop
    pid = int(m.group(1), 16)
    for _ in range(2):
        assert c.request(options_for(pid, [pid])) == b"OK"
        child = clone_of(c.request("vCont;c:p%x.-1" % pid), pid, pid)
        check_new_thread_held(c, pid, child)
        # GDB followed the clone: the new thread gets its options too, and everything runs on.
        assert c.request(options_for(pid, [pid, child])) == b"OK"
        assert c.request("vCont;c:p%x.-1" % pid) == b"w0;p%x.%x" % (pid, child)
    assert c.request(options_for(pid, [pid])) == b"OK"
    assert c.request("vCont;c:p%x.-1" % pid) == b"W03;process:%x" % pid
    c.close()


def test_all_stop_without_options_nothing_is_reported(procs):
    """GDB 15 clears the options before a plain continue: the program runs to its exit."""
    srv = procs.server(["--once", "{COMM}", PROG])
    c = connect(srv)
    pid = int(re.search(rb"thread:p([0-9a-f]+)\.", c.request("?")).group(1), 16)
    assert c.request("QThreadOptions;0") == b"OK"
    assert c.request("vCont;c:p%x.-1" % pid) == b"W03;process:%x" % pid
    c.close()


def test_non_stop_clone_and_exit_notifications(procs):
    srv = procs.server(["--once", "{COMM}", PROG])
    c = connect(srv)
    assert c.request("QNonStop:1") == b"OK"
    first = c.request("?")
    m = re.match(rb"T05.*thread:p([0-9a-f]+)\.([0-9a-f]+);", first)
    assert m, first
    pid = int(m.group(1), 16)
    assert c.request("vStopped") == b"OK"

    live = {pid}
    assert c.request(options_for(pid, sorted(live))) == b"OK"
    assert c.request("vCont;c") == b"OK"
    seen = []
    while not seen or not seen[-1].startswith(b"W"):
        # A notification, then vStopped until OK: every queued stop in order.
        events = [c.recv_notification(timeout=20)]
        while True:
            more = c.request("vStopped")
            if more == b"OK":
                break
            events.append(more)
        resume = False
        for ev in events:
            seen.append(ev)
            if ev.startswith(b"T05clone:"):
                child = clone_of(ev, pid, pid)
                check_new_thread_held(c, pid, child)
                live.add(child)
                resume = True
            elif ev.startswith(b"w"):
                m = re.fullmatch(rb"w0;p%x\.([0-9a-f]+)" % pid, ev)
                assert m, ev
                live.discard(int(m.group(1), 16))
        if resume:   # GDB follows the clone, then resumes the parent and the new thread
            assert c.request(options_for(pid, sorted(live))) == b"OK"
            assert c.request("vCont;c") == b"OK"
    kinds = [re.sub(rb"[:;].*", b"", ev) for ev in seen]
    assert kinds == [b"T05clone", b"w0", b"T05clone", b"w0", b"W03"], seen
    assert seen[-1] == b"W03;process:%x" % pid
    c.close()
