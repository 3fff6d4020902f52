"""Thread-local storage (qGetTLSAddr): GDB prints each thread's own __thread variables, errno
and a shared library's TLS; a static program; storage a thread does not have yet; and no
libthread_db (monitor set libthread-db-search-path). Every expectation also holds for
/usr/bin/gdbserver (BRANCHSTUB_SERVER=/usr/bin/gdbserver)."""
import re

import pytest

from harness import RSP, gdb_remote, inferior

TLS = inferior("tls")
TLS_STATIC = inferior("tls_static")

# GDB's per-thread heading of `thread apply all`, with the name the program gave the thread.
HEAD = re.compile(r'^Thread \d+ \(Thread [0-9a-f.]+ "([^"]+)"\):\n(.*?)(?=^Thread \d+ \(|\Z)', re.M | re.S)


def per_thread(out, expr_count):
    """{thread name: [values printed]} from the `thread apply all print ...` blocks."""
    values = {}
    for name, body in HEAD.findall(out):
        values.setdefault(name, []).extend(int(v) for v in re.findall(r"^\$\d+ = (-?\d+)$", body, re.M))
    assert values and all(len(v) == expr_count for v in values.values()), out
    return values


def cannot_find(out, what, file_name):
    """GDB's message for an E01 answer to qGetTLSAddr (gdb/target.c, remote.c)."""
    return re.search(r"Cannot find thread-local storage for Thread [0-9a-f.]+, %s \S*/%s:\n"
                     r"Remote target failed to process qGetTLSAddr request"
                     % (what, re.escape(file_name)), out)


@pytest.mark.parametrize("extended", [False, True], ids=["remote", "extended-remote"])
def test_each_thread_sees_its_own_tls(procs, extended):
    if extended:
        srv = procs.server(["--once", "--multi", "{COMM}"])
        start = ["set remote exec-file " + TLS, "break all_set", "run"]
    else:
        srv = procs.server(["--once", "{COMM}", TLS])
        start = ["break all_set", "continue"]
    r = gdb_remote(srv, start + [
        "thread apply all print tls_var",
        "thread apply all print lib_tls",
        "thread apply all print (int) errno", "kill"], prog=TLS, extended=extended, timeout=90)
    assert re.search(r'Thread 1 "tls" hit Breakpoint 1, all_set \(\)', r.out), r
    values = per_thread(r.out, 3)
    assert values == {"tls": [100, 500, 1000],
                      "tls-worker-1": [101, 501, 1001],
                      "tls-worker-2": [102, 502, 1002]}, r
    assert "qGetTLSAddr" not in r.out, r


def test_shared_library_tls_and_storage_not_allocated_yet(procs):
    """dl_tls lives in a library main dlopened after the workers started: main has storage
    for it, the workers do not (libthread_db: TD_TLSDEFER; gdbserver answers E01)."""
    srv = procs.server(["--once", "{COMM}", TLS])
    r = gdb_remote(srv, [
        "break all_set", "continue",
        "print dl_tls", "print lib_tls", "info address lib_tls",
        "thread 2", "print lib_tls", "print dl_tls",
        "thread 3", "print dl_tls", "print tls_var", "kill"], prog=TLS, timeout=90)
    out = r.out
    assert re.search(r"^\$1 = 900$", out, re.M), r
    assert re.search(r"^\$2 = 500$", out, re.M), r
    assert re.search(r'Symbol "lib_tls" is a thread-local variable at offset 0x0 in the '
                     r'thread-local storage for `[^`]*libtls_lib\.so', out), r
    assert re.search(r"^\$3 = 50[12]$", out, re.M), r
    assert len(re.findall("Cannot find thread-local storage", out)) == 2, r
    assert cannot_find(out, "shared library", "libtls_dl.so"), r
    assert re.search(r"^\$4 = 10[12]$", out, re.M), r


def test_static_program(procs):
    """A static program has no link_map: GDB asks with lm 0 for the executable's block."""
    srv = procs.server(["--once", "{COMM}", TLS_STATIC])
    r = gdb_remote(srv, ["break all_set", "continue",
                         "thread apply all print tls_var",
                         "thread apply all print (int) errno", "kill"], prog=TLS_STATIC, timeout=90)
    assert re.search(r'hit Breakpoint 1, all_set \(\)', r.out), r
    values = per_thread(r.out, 2)
    assert values == {"tls_static": [100, 1000],
                      "tls-worker-1": [101, 1001],
                      "tls-worker-2": [102, 1002]}, r


def test_no_thread_db(procs):
    """gdb.server/no-thread-db.exp: an unresolvable search path, then GDB's graceful error."""
    srv = procs.server(["--once", "{COMM}", TLS])
    r = gdb_remote(srv, [
        "monitor set libthread-db-search-path /nonexistent",
        "break all_set", "continue", "print tls_var", "print lib_tls",
        "monitor set libthread-db-search-path", "kill"], prog=TLS, timeout=90)
    out = r.out
    assert "libthread-db-search-path set to `/nonexistent'" in out, r
    assert cannot_find(out, "executable file", "tls"), r
    assert cannot_find(out, "shared library", "libtls_lib.so"), r
    assert not re.search(r"^\$\d+ = ", out, re.M), r
    assert "libthread-db-search-path set to `$sdir:$pdir'" in out, r


def test_raw_replies(procs):
    """E01 wherever gdbserver answers E01: malformed requests, an unknown thread, and a
    process stopped at the loader's entry, before libc (and so libthread_db's view) exists."""
    srv = procs.server(["--once", "{COMM}", TLS])
    c = RSP(srv.port)
    c.handshake()
    stop = c.request("?")
    m = re.search(rb"thread:p([0-9a-f]+)\.([0-9a-f]+);", stop)
    assert m, stop
    pid = m.group(1).decode()
    for payload in ["qGetTLSAddr:", "qGetTLSAddr:zz,0,0", "qGetTLSAddr:p%s.%s,0" % (pid, pid),
                    "qGetTLSAddr:p%s.7fffffff,0,0" % pid, "qGetTLSAddr:p%s.%s,0,0" % (pid, pid)]:
        reply = c.request(payload)
        assert reply == b"E01" or reply.startswith(b"E."), (payload, reply)  # gdbserver: E01
    assert c.request("qGetTLSAddr") == b""   # not this packet: unknown, empty reply
    c.close()
