"""`--disable-packet=LIST`, gdbserver's maintenance option: what the wire then looks like, and
that real GDB sessions still work (GDB's testsuite uses it in stop-reply-no-thread*.exp)."""
import re

import pytest

from harness import IS_GDBSERVER, RSP, gdb_remote, inferior, line_of

BASIC = inferior("basic")
THREADS = inferior("threads")


def rsp_session(procs, disabled):
    srv = procs.server(["--once", "--disable-packet=" + disabled, "{COMM}", BASIC])
    rsp = RSP(srv.port)
    rsp.handshake()
    return srv, rsp


def test_T_makes_stop_replies_S(procs):
    _, rsp = rsp_session(procs, "T")
    assert rsp.request("?") == b"S05"
    assert rsp.request("vCont;s").startswith(b"S05")


def test_Tthread_drops_thread_and_core(procs):
    _, rsp = rsp_session(procs, "Tthread")
    reply = rsp.request("?")
    assert reply.startswith(b"T05"), reply
    assert b"thread:" not in reply and b"core:" not in reply, reply
    step = rsp.request("vCont;s")
    assert step.startswith(b"T05") and b"thread:" not in step, step


def test_vCont_is_not_offered(procs):
    _, rsp = rsp_session(procs, "vCont")
    assert rsp.request("vCont?") == b""
    assert rsp.request("vCont;s") == b""  # not run: the process is still where it was
    reply = rsp.request("?")
    assert reply.startswith(b"T05") and b"thread:" in reply, reply
    assert rsp.request("s").startswith(b"T05")  # the legacy step still works


def test_qC_and_qfThreadInfo(procs):
    _, rsp = rsp_session(procs, "qC,qfThreadInfo")
    assert rsp.request("qC") == b""
    assert rsp.request("qfThreadInfo") == b""
    assert rsp.request("qsThreadInfo") == b""
    assert rsp.request("vCont?").startswith(b"vCont;")  # not in the list: still there


def test_threads_is_four_of_them(procs):
    _, rsp = rsp_session(procs, "threads")
    assert rsp.request("vCont?") == b""
    assert rsp.request("qC") == b""
    assert rsp.request("qfThreadInfo") == b""
    reply = rsp.request("?")
    assert reply.startswith(b"T05") and b"thread:" not in reply, reply  # T itself is not in it


def test_without_the_option_everything_is_there(procs):
    srv = procs.server(["--once", "{COMM}", BASIC])
    rsp = RSP(srv.port)
    rsp.handshake()
    assert rsp.request("vCont?").startswith(b"vCont;")
    assert rsp.request("qC").startswith(b"QC")
    assert rsp.request("qfThreadInfo").startswith(b"m")
    reply = rsp.request("?")
    assert reply.startswith(b"T05") and b"thread:" in reply, reply


LISTS = ["T", "Tthread", "vCont", "qC", "qfThreadInfo", "threads", "T,qfThreadInfo"]


@pytest.mark.parametrize("disabled", LISTS)
def test_gdb_session_single_thread(procs, disabled):
    srv = procs.server(["--once", "--disable-packet=" + disabled, "{COMM}", BASIC])
    r = gdb_remote(srv, ["info threads", "break marker", "continue", "info threads", "print counter",
                         "continue"], prog=BASIC)
    out = r.out
    assert re.search(r"Breakpoint 1, marker \(\) at .*basic\.c:%d" % line_of("basic", "marker-body"), out), r
    assert len(re.findall(r"^\* 1 +Thread ", out, re.M)) == 2, r
    assert re.search(r"\$1 = 5\b", out), r
    assert re.search(r"\[Inferior 1 \(process \d+\) exited with code 07\]", out), r


@pytest.mark.parametrize("disabled", LISTS)
def test_gdb_session_threads(procs, disabled):
    if IS_GDBSERVER and disabled in ("vCont", "threads"):
        pytest.skip("gdbserver 13.1 with vCont disabled: GDB asserts in finish_step_over, or hangs")
    srv = procs.server(["--once", "--disable-packet=" + disabled, "{COMM}", THREADS])
    r = gdb_remote(srv, ["break all_running", "continue", "info threads", "continue"],
                   prog=THREADS, timeout=120)
    out = r.out
    assert re.search(r"hit Breakpoint 1, all_running \(\)", out), r
    listed = re.findall(r"^\*? +\d+ +Thread ", out, re.M)
    assert len(listed) == 9, r
    assert re.search(r"\[Inferior 1 \(process \d+\) exited normally\]", out), r
    assert "internal-error" not in out, r
