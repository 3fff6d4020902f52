"""Interrupting a running program: SIGINT to gdb, `continue &` + `interrupt`, and a raw
client sending the 0x03 byte."""
import os
import re
import signal
import subprocess

from harness import (GDB, GDB_PRELUDE, GDB_SYSROOT, RSP, Reader, gdb, inferior, read_heartbeat,
                     target_cmd, wait_heartbeat)

SLEEPER = inferior("sleeper")


def test_sigint_to_gdb(procs, heartbeat):
    srv = procs.server(["--once", "{COMM}", SLEEPER, heartbeat])
    argv = [GDB, "-nx", "-batch"]
    for c in GDB_PRELUDE + GDB_SYSROOT + [target_cmd(srv), "continue", "print loop_counter > 0",
                                          "info registers rip", "kill"]:
        argv += ["-ex", c]
    argv.append(SLEEPER)
    g = procs.spawn(argv, stderr=subprocess.STDOUT)
    out = Reader(g.stdout)
    wait_heartbeat(heartbeat, timeout=30)          # the program runs: gdb is in `continue`
    os.kill(g.pid, signal.SIGINT)
    g.wait(30)
    assert out.wait_for(r"\[Inferior 1 \(process \d+\) killed\]", 10), out.text
    assert "Program received signal SIGINT, Interrupt." in out.text, out.text
    assert re.search(r"\$1 = 1\b", out.text), out.text
    assert re.search(r"^rip +0x", out.text, re.M), out.text


def test_continue_background_then_interrupt(procs, heartbeat):
    """Async all-stop: gdb reads commands from a pipe, so its event loop runs between them."""
    srv = procs.server(["--once", "{COMM}", SLEEPER, heartbeat])
    g = procs.spawn([GDB, "-nx", "-q", SLEEPER], stdin=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = Reader(g.stdout)

    def send(cmd):
        g.stdin.write((cmd + "\n").encode())
        g.stdin.flush()

    for c in GDB_PRELUDE + GDB_SYSROOT + ["set non-stop off", target_cmd(srv), "continue &"]:
        send(c)
    wait_heartbeat(heartbeat, timeout=30)
    send("interrupt")
    assert out.wait_for(r"received signal SIGINT", 10), out.text
    stopped_at = read_heartbeat(heartbeat)
    send("print $pc")
    assert out.wait_for(r"\$1 = \(void \(\*\)\(\)\) 0x", 10), out.text
    # The program really is stopped: its heartbeat no longer moves while gdb answers.
    send("print loop_counter")
    assert out.wait_for(r"\$2 = \d+", 10), out.text
    assert read_heartbeat(heartbeat) == stopped_at
    send("kill")
    send("quit")
    g.stdin.close()
    g.wait(30)
    assert re.search(r"\[Inferior 1 \(process \d+\) killed\]", out.text), out.text


def test_raw_interrupt_byte(procs, heartbeat):
    srv = procs.server(["--once", "{COMM}", SLEEPER, heartbeat])
    c = RSP(srv.port)
    c.handshake()
    stop = c.request("?")
    assert stop[:1] in (b"T", b"S"), stop
    c.send_raw(b"$c#63")
    wait_heartbeat(heartbeat, timeout=30)
    c.send_raw(b"\x03")
    reply = c.recv_packet(timeout=10)
    assert re.match(rb"[TS]02", reply), reply      # SIGINT in GDB's numbering
    assert c.alive()
    c.send_raw(b"$k#6b")
    c.close()
