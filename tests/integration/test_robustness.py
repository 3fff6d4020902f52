"""Bad input at the packet level, disconnects mid-run, and the listening address."""
import os
import re
import signal

import pytest

from harness import (IS_GDBSERVER, RSP, frame, gdb_remote, inferior, proc_state, RUNNING_STATES,
                     wait_gone, wait_heartbeat, wait_until)

BASIC = inferior("basic")
SLEEPER = inferior("sleeper")

MALFORMED = [
    "m", "mZZ,4", "m0", "m0,", "m,4", "m0,4", "mffffffffffffffff,10", "M0,4:zz", "Mxyz",
    "X0,zz:", "Z0,xyz", "Z9,0,1", "z0", "p", "pzz", "P", "Pzz=00", "Gzz",
    "H", "Hx", "Hgzz", "T", "Tzz", "vCont;q", "vCont;x:1", "vFile:open:", "vFile:pread:zz",
    "qXfer:features:read:", "qXfer:features:read:target.xml:zz", "qXfer:nosuch:read::0,10",
    "qRcmd,zz", "qSupported:" + "x" * 4000, "QPassSignals:zz", "qThreadExtraInfo,zz",
    "vAttach;zz", "vRun;zz", "Qbtrace:nosuch", "qXfer:btrace:read:nosuch:0,10",
    "\x01\x02\x7f\xff", "}", "}}}", "x" * 300,
]


def _connect_basic(procs):
    srv = procs.server(["{COMM}", BASIC])      # no --once: it accepts the next client
    c = RSP(srv.port)
    c.handshake(noack=False)                     # stay in ack mode to see '-' for bad sums
    stop = c.request("?")
    assert stop[:1] in (b"T", b"S"), stop
    return srv, c


def test_malformed_packets_get_error_or_empty(procs):
    srv, c = _connect_basic(procs)
    wrong = []
    for p in MALFORMED:
        reply = c.request(p.encode("latin-1"), timeout=5)
        if not (reply == b"" or reply.startswith(b"E") or p.startswith("qSupported")):
            wrong.append((p, reply[:80]))
        assert srv.alive(), "server died on %r" % p
    assert c.alive()
    if not IS_GDBSERVER:        # gdbserver is lax (e.g. `Hgzz` -> OK); branchstub is not
        assert not wrong, wrong
    c.close()
    r = gdb_remote(srv, ["break marker", "continue", "print counter", "continue"], prog=BASIC)
    assert "Breakpoint 1, marker ()" in r.out and "exited with code 07" in r.out, r


def test_bad_checksum_is_nacked_and_garbage_ignored(procs):
    srv, c = _connect_basic(procs)
    c.send_raw(b"$qC#00")
    c.sock.settimeout(5)
    assert c.sock.recv(1) == b"-"
    c.send_raw(b"garbage bytes outside any packet ####")
    assert c.alive()
    c.close()


def test_truncated_packets(procs):
    srv, c = _connect_basic(procs)
    c.send_raw(b"$m0,4")                 # no '#..': the next '$' starts over or NAKs
    for _ in range(3):
        c.send_raw(frame("qC"))
        try:
            reply = c.recv_packet(timeout=5)
            break
        except TimeoutError:
            continue
    else:
        pytest.fail("no reply after a truncated packet")
    c.send_raw(b"$qC#b")                 # checksum cut short
    c.close()                            # ... and the client goes away mid-packet
    assert srv.alive()
    r = gdb_remote(srv, ["break marker", "continue", "continue"], prog=BASIC)
    assert "exited with code 07" in r.out, r


@pytest.mark.branchstub_only
def test_oversized_packet(procs):
    """gdbserver's 18 KiB buffer overflows here; branchstub must answer and stay alive."""
    srv, c = _connect_basic(procs)
    big = "M0,100000:" + "00" * (1 << 20)           # 2 MiB
    reply = c.request(big, timeout=20)
    assert reply == b"" or reply.startswith(b"E"), reply[:100]
    reply = c.request("q" + "A" * (2 << 20), timeout=20)
    assert reply == b"" or reply.startswith(b"E"), reply[:100]
    assert c.alive()
    c.close()
    r = gdb_remote(srv, ["break marker", "continue", "print counter", "continue"], prog=BASIC)
    assert re.search(r"\$1 = 5\b", r.out) and "exited with code 07" in r.out, r


@pytest.mark.branchstub_only
def test_disconnect_mid_run_kills_launched_program(procs, heartbeat):
    srv = procs.server(["--once", "{COMM}", SLEEPER, heartbeat])
    c = RSP(srv.port)
    c.handshake()
    stop = c.request("?")
    m = re.search(rb"thread:p?([0-9a-f]+)", stop)
    c.send_raw(frame("vCont;c"))
    wait_heartbeat(heartbeat, timeout=30)
    pid = int(m.group(1), 16) if m else None
    c.sock.close()                        # abrupt: no k, no D
    assert srv.wait_exit(10) is not None, "--once server still running after the disconnect"
    if pid:
        wait_gone(pid)
    # the procs fixture asserts no stray or zombie sleeper remains


def test_disconnect_mid_run_detaches_attached_program(procs, heartbeat):
    sleeper, pid = procs.spawn_sleeper(heartbeat)
    srv = procs.server(["--once", "--attach", "{COMM}", str(pid)])
    c = RSP(srv.port)
    c.handshake()
    c.request("?")
    before = wait_heartbeat(heartbeat)
    c.send_raw(frame("vCont;c"))
    wait_heartbeat(heartbeat, after=before)
    c.sock.close()
    if not IS_GDBSERVER:        # gdbserver 13 keeps the process traced and waits
        wait_until(lambda: not srv.alive(), 10, "server exit after the client went away")
    after = wait_heartbeat(heartbeat)
    wait_heartbeat(heartbeat, after=after)   # still running
    if not IS_GDBSERVER:
        with open("/proc/%d/status" % pid) as f:
            assert re.search(r"^TracerPid:\s+0$", f.read(), re.M), "still traced"
    assert proc_state(pid) in RUNNING_STATES


def _listening(port):
    socks = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(name) as f:
            for line in f.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                addr, p = local.split(":")
                if int(p, 16) == port and state == "0A":
                    socks.add(addr)
    return socks


@pytest.mark.branchstub_only
def test_colon_port_listens_on_loopback_only(procs):
    srv = procs.server(["--once", "{COMM}", BASIC], host="")
    assert srv.stderr.wait_for(r"Listening on port %d" % srv.port, 1)
    assert _listening(srv.port) == {"0100007F"}, _listening(srv.port)


@pytest.mark.branchstub_only
def test_explicit_loopback_address_is_honoured(procs):
    srv = procs.server(["--once", "{COMM}", BASIC], host="127.0.0.1")
    assert _listening(srv.port) == {"0100007F"}, _listening(srv.port)


def _runtime_address(pid, binary, symbol):
    """Address of `symbol` in the running process (PIE base from /proc/PID/maps + nm value)."""
    import subprocess
    nm = subprocess.run(["nm", binary], stdout=subprocess.PIPE, text=True, check=True).stdout
    value = int(re.search(r"^([0-9a-f]+) [Tt] %s$" % symbol, nm, re.M).group(1), 16)
    real = os.path.realpath(binary)
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 6 and os.path.realpath(fields[5]) == real and fields[2] == "00000000":
                return int(fields[0].split("-")[0], 16) + value
    return value  # not PIE


def _peek(pid, addr, n=1):
    with open("/proc/%d/mem" % pid, "rb") as f:
        f.seek(addr)
        return f.read(n)


@pytest.mark.branchstub_only
def test_sigterm_while_attached_run_restores_code_and_detaches(procs, heartbeat):
    """A server told to stop (SIGTERM) mid-run must not leave its int3s in an attached program."""
    sleeper, pid = procs.spawn_sleeper(heartbeat)
    addr = _runtime_address(pid, SLEEPER, "main")
    original = _peek(pid, addr)
    srv = procs.server(["--attach", "{COMM}", str(pid)])
    c = RSP(srv.port)
    c.handshake()
    c.request("?")
    assert c.request("Z0,%x,1" % addr) == b"OK"
    assert _peek(pid, addr) == b"\xcc"                 # really inserted
    before = wait_heartbeat(heartbeat)
    c.send_raw(frame("vCont;c"))
    wait_heartbeat(heartbeat, after=before)
    srv.proc.send_signal(signal.SIGTERM)
    wait_until(lambda: not srv.alive(), 10, "server exit after SIGTERM")
    assert _peek(pid, addr) == original, "breakpoint left in the program"
    after = wait_heartbeat(heartbeat)
    wait_heartbeat(heartbeat, after=after)             # still running, unharmed
    with open("/proc/%d/status" % pid) as f:
        assert re.search(r"^TracerPid:\s+0$", f.read(), re.M), "still traced"
    assert proc_state(pid) in RUNNING_STATES
