"""The start-up packets of newer clients, replayed byte for byte with the raw RSP client
against the real server and a real inferior, each reply checked for its format (values that
vary, such as addresses, are compared with what /proc and the ELF file say).

Where each transcript comes from (the clients are not installed here; their sources are):
  GDB 16.1, 16.3 (= 16.2's protocol) and 17.2: gdb/remote.c, remote_query_supported (the
    qSupported offer, identical in the three), remote_target::start_remote_1 (the order:
    qSupported, vMustReplyEmpty, QStartNoAckMode, QProgramSignals, Hgp0.0 and
    qXfer:features:read from target_find_description, QNonStop:0, qTStatus (then qTfV, qTsV, qTfP
    once a status came), '?',
    qXfer:threads:read, then, while the inferior is added, qAttached and qXfer:exec-file:read,
    Hc-1, qOffsets) and remote_read_bytes_1 (the memory read: 'x' unless x is known to be
    off; 16.1 has no binary-upload entry in remote_protocol_features, so it tries 'x'
    unasked, 16.2+ only after binary-upload+). QProgramSignals lists the signals whose
    signal_pass_state() holds (remote_target::program_signals, with infrun.c's defaults).
    qXfer lengths are get_remote_packet_size() - 5 (remote_read_qxfer) with our PacketSize.
  GDB 15: the same sequence; its offer is 16's without error-message+ (that feature is not
    in GDB 15's NEWS, and this could not be checked against 15's source here), and it reads
    memory with 'm' (x arrived in GDB 16).
  LLDB 19.1.7: lldb/source/Plugins/Process/gdb-remote/GDBRemoteCommunicationClient.cpp
    (GetRemoteQSupported's offer, GetxPacketSupported's "x0,0" probe that must answer OK)
    and ProcessGDBRemote::DoReadMemory (the bare data after 'x'); the order is the one
    Debian's lldb-19 (19.1.7) sent to branchstub on `gdb-remote` with `log enable
    gdb-remote packets`, up to its first memory reads (it read the vDSO where we read the
    program's first page).
"""
import os
import re

import pytest

import hwfeeds
from harness import RSP, inferior

BASIC = inferior("basic")

PACKET_SIZE = 0x20000
QXFER_LEN = "%x" % (PACKET_SIZE - 5)

GDB_OFFER_15 = ("qSupported:multiprocess+;swbreak+;hwbreak+;qRelocInsn+;fork-events+;vfork-events+;"
                "exec-events+;vContSupported+;QThreadEvents+;QThreadOptions+;no-resumed+;"
                "memory-tagging+;xmlRegisters=i386")
GDB_OFFER_16 = GDB_OFFER_15 + ";error-message+"   # 16.1, 16.3 and 17.2 alike
LLDB_OFFER_19 = "qSupported:xmlRegisters=i386,arm,mips,arc;multiprocess+;fork-events+;vfork-events+"
PROGRAM_SIGNALS = "QProgramSignals:e;10;14;17;1a;1b;1c;21;24;25;2c;4c;97;"


def unescape(data: bytes) -> bytes:
    out = bytearray()
    i = 0
    while i < len(data):
        if data[i] == 0x7d:
            out.append(data[i + 1] ^ 0x20)
            i += 2
        else:
            out.append(data[i])
            i += 1
    return bytes(out)


def features(reply: bytes):
    return reply.decode("latin-1").split(";")


def exe_base(pid):
    """The address the program's first page (file offset 0) is mapped at."""
    real = os.path.realpath(BASIC)
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5] == real and int(parts[2], 16) == 0:
                return int(parts[0].split("-")[0], 16)
    raise AssertionError("the program is not mapped in %d" % pid)


def elf_head(n):
    with open(BASIC, "rb") as f:
        return f.read(n)


def connect(procs):
    srv = procs.server(["--once", "{COMM}", BASIC])
    c = RSP(srv.port)
    c.send_raw(b"+")          # every client acks what the server may have sent already
    return srv, c


def gdb_startup(c, offer):
    """GDB 15-17's `target remote` up to the first memory read; returns (qSupported reply, pid)."""
    sup = c.request(offer)
    f = features(sup)
    assert f[0] == "PacketSize=%x" % PACKET_SIZE, sup
    for needed in ("QStartNoAckMode+", "multiprocess+", "swbreak+", "qXfer:features:read+",
                   "qXfer:threads:read+", "QNonStop+", "QProgramSignals+", "vContSupported+"):
        assert needed in f, (needed, sup)
    assert c.request("vMustReplyEmpty") == b""
    assert c.request("QStartNoAckMode") == b"OK"
    c.ack = False
    assert c.request(PROGRAM_SIGNALS) == b"OK"
    assert c.request("Hgp0.0") == b"OK"
    tdesc = c.request("qXfer:features:read:target.xml:0," + QXFER_LEN)
    assert tdesc[:1] == b"l" and b"<target" in tdesc and b"i386:x86-64" in tdesc, tdesc[:200]
    assert b"xi:include" not in tdesc      # one read: GDB asks for nothing else
    assert c.request("QNonStop:0") == b"OK"
    # Tracepoints served (issue 31): nothing run yet, then GDB uploads the variables (the builtin
    # $trace_timestamp) and the tracepoints (none), as from gdbserver.
    assert c.request("qTStatus").startswith(b"T0;tnotrun:0;tframes:0;tcreated:0;tfree:500000;tsize:500000;")
    assert c.request("qTfV") == b"1:0:1:" + b"trace_timestamp".hex().encode()
    assert c.request("qTsV") == b"l"
    assert c.request("qTfP") == b"l"
    stop = c.request("?")
    m = re.match(rb"T05.*thread:p([0-9a-f]+)\.([0-9a-f]+);", stop)
    assert m, stop
    pid = int(m.group(1), 16)
    threads = c.request("qXfer:threads:read::0," + QXFER_LEN)
    assert threads[:1] == b"l" and (b'<thread id="p%x.%x"' % (pid, pid)) in threads, threads
    assert c.request("qAttached:%x" % pid) == b"0"
    exe = c.request("qXfer:exec-file:read:%x:0,%s" % (pid, QXFER_LEN))
    assert exe == b"l" + os.path.realpath(BASIC).encode(), exe
    assert c.request("Hc-1") == b"OK"
    assert c.request("qOffsets") == b""
    return sup, pid


def check_x_read(c, pid):
    """GDB's x: 'b' + the escaped bytes, equal to the ELF file's; an empty read is "b"."""
    base = exe_base(pid)
    head = c.request("x%x,40" % base)
    assert head[:1] == b"b", head[:20]
    assert unescape(head[1:]) == elf_head(0x40)
    assert unescape(head[1:])[:4] == b"\x7fELF"
    # A longer read: the headers hold bytes that need '}' escapes and runs that RLE shortens.
    page = c.request("x%x,400" % base)
    assert page[:1] == b"b" and unescape(page[1:]) == elf_head(0x400)
    assert c.request("x%x,0" % base) == b"b"
    assert c.request("x0,8")[:1] == b"E"   # unmapped: an error, never a 'b'


def gdb_vfile_stat(c):
    """GDB 16's vFile:stat and 17's vFile:lstat on the program: F40; and the fio_stat."""
    path = os.path.realpath(BASIC).encode().hex()
    st = os.stat(BASIC)
    for op in ("stat", "lstat"):
        r = c.request("vFile:%s:%s" % (op, path))
        assert r.startswith(b"F40;"), r
        fio = unescape(r[4:])
        assert len(fio) == 64
        assert int.from_bytes(fio[28:36], "big") == st.st_size
        assert int.from_bytes(fio[8:12], "big") & 0o100000          # S_IFREG
    assert c.request("vFile:stat:" + b"/nonexistent".hex()) == b"F-1,2"


def finish(c):
    c.send_raw(b"$k#6b")


@pytest.mark.branchstub_only
def test_gdb_15_startup_reads_memory_with_m(procs):
    srv, c = connect(procs)
    sup, pid = gdb_startup(c, GDB_OFFER_15)
    base = exe_base(pid)
    r = c.request("m%x,40" % base)
    assert bytes.fromhex(r.decode()) == elf_head(0x40)
    # Without error-message+, m fails with a numeric code only.
    assert re.fullmatch(rb"E[0-9a-f]{2}", c.request("m0,8")), "GDB 15 takes no E.text from m"
    finish(c)


@pytest.mark.branchstub_only
def test_gdb_16_1_sends_x_unasked_and_gets_gdbs_format(procs):
    srv, c = connect(procs)
    sup, pid = gdb_startup(c, GDB_OFFER_16)
    # 16.1 ignores binary-upload+ (it knows no such feature) and tries x on its first read:
    # a non-empty reply tells it x works, and that reply must start with 'b'.
    check_x_read(c, pid)
    gdb_vfile_stat(c)
    finish(c)


@pytest.mark.branchstub_only
def test_gdb_16_2_and_17_use_x_after_binary_upload(procs):
    for offer in (GDB_OFFER_16,):   # 16.2/16.3 and 17.2 send the same offer and sequence
        srv, c = connect(procs)
        sup, pid = gdb_startup(c, offer)
        f = features(sup)
        assert "binary-upload+" in f, sup        # else GDB 16.2+ would fall back to m
        assert f.index("binary-upload+") == f.index("QSetWorkingDir+") + 1   # where gdbserver puts it
        check_x_read(c, pid)
        gdb_vfile_stat(c)
        # error-message+ was offered: m and qRcmd may fail with the reason.
        assert c.request("m0,8").startswith(b"E."), "GDB 16+ takes E.text from m"
        finish(c)


@pytest.mark.branchstub_only
def test_gdb_17_btrace_pt_options(procs, tmp_path):
    """GDB 15+'s Qbtrace-conf:pt:ptwrite / event-tracing, as GDB 16/17 send them before
    Qbtrace:pt. PT comes from the test feed (an AUX ring in a file), so it is listed here;
    the PMU options are read from this machine's sysfs: with no intel_pt PMU, PTWRITE stays
    off and event tracing is refused in gdbserver's words."""
    aux = str(tmp_path / "pt.aux")
    hwfeeds.AuxRing(aux, 0x4000)
    srv = procs.server(["--once", "--test-pt-aux=" + aux, "{COMM}", BASIC])
    c = RSP(srv.port)
    c.send_raw(b"+")
    sup, pid = gdb_startup(c, GDB_OFFER_16)
    f = features(sup)
    assert f.index("Qbtrace-conf:pt:ptwrite+") == f.index("Qbtrace-conf:pt:size+") + 1, sup
    assert f.index("Qbtrace-conf:pt:event-tracing+") == f.index("Qbtrace-conf:pt:ptwrite+") + 1, sup
    assert c.request("Hgp%x.%x" % (pid, pid)) == b"OK"
    assert c.request("Qbtrace-conf:pt:ptwrite=maybe") == b"E.Bad ptwrite value."
    assert c.request('Qbtrace-conf:pt:ptwrite="yes"') == b"OK"
    caps = "/sys/bus/event_source/devices/intel_pt/caps/"
    event_tracing = os.path.exists(caps + "event_trace") and open(caps + "event_trace").read().strip() == "1"
    assert c.request('Qbtrace-conf:pt:event-tracing="yes"') == b"OK"
    if not event_tracing:
        assert c.request("Qbtrace:pt") == b"E.Event tracing for record btrace pt is not supported."
        assert c.request('Qbtrace-conf:pt:event-tracing="no"') == b"OK"
    assert c.request("Qbtrace:pt") == b"OK"
    conf = c.request("qXfer:btrace-conf:read::0," + QXFER_LEN)
    assert re.search(rb'<pt size="0x[0-9a-f]+" ptwrite="no" event-tracing="(no|yes)"/>', conf), conf
    assert c.request("Qbtrace:off") == b"OK"
    finish(c)


@pytest.mark.branchstub_only
def test_gdb_18_exec_and_args(procs):
    srv, c = connect(procs)
    gdb_startup(c, GDB_OFFER_16)
    r = c.request("qExecAndArgs")
    assert r == b"S;" + BASIC.encode().hex().encode() + b";;", r
    finish(c)


@pytest.mark.branchstub_only
def test_lldb_19_startup_and_its_bare_x(procs):
    srv, c = connect(procs)
    assert c.request("QStartNoAckMode") == b"OK"
    c.ack = False
    sup = c.request(LLDB_OFFER_19)
    f = features(sup)
    assert f[0] == "PacketSize=%x" % PACKET_SIZE, sup
    assert "native-signals+" in f and "binary-upload+" not in f, sup
    assert c.request("QThreadSuffixSupported") == b"OK"
    assert c.request("QListThreadsInStopReply") == b"OK"
    host = c.request("qHostInfo")
    assert b"triple:" + b"x86_64-pc-linux-gnu".hex().encode() in host and b"ptrsize:8;" in host, host
    assert c.request("vCont?").startswith(b"vCont;c;C;")
    assert c.request("qVAttachOrWaitSupported") in (b"", b"OK")
    assert c.request("QEnableErrorStrings") == b"OK"
    info = c.request("qProcessInfo")
    m = re.match(rb"pid:([0-9a-f]+);", info)
    assert m, info
    pid = int(m.group(1), 16)
    stop = c.request("?")
    assert stop.startswith(b"T") and b"thread:p%x.%x;" % (pid, pid) in stop, stop
    tdesc = c.request("qXfer:features:read:target.xml:0,%x" % (PACKET_SIZE - 1))
    assert tdesc[:1] == b"l" and b"<target" in tdesc, tdesc[:100]
    assert re.fullmatch(rb"[0-9a-f]{16}", c.request("p0;thread:%x;" % pid))   # rax
    assert c.request("qStructuredDataPlugins") == b""
    auxv = c.request("qXfer:auxv:read::0,%x" % (PACKET_SIZE - 1))
    assert auxv[:1] == b"l" and len(unescape(auxv[1:])) % 16 == 0, auxv[:40]
    assert c.request("qSymbol::") in (b"", b"OK")
    base = exe_base(pid)
    region = c.request("qMemoryRegionInfo:%x" % base)
    assert region.startswith(b"start:%x;" % base), region
    # GetxPacketSupported: OK means LLDB reads with x, and takes the data without a 'b'.
    assert c.request("x0,0") == b"OK"
    data = c.request("x%x,200" % base)
    assert unescape(data) == elf_head(0x200)
    assert data[:4] == b"\x7fELF"
    err = c.request("x0,8")
    assert re.fullmatch(rb"E[0-9a-f]{2};[0-9a-f]*", err), err   # LLDB's error strings: Exx;hex
    finish(c)
