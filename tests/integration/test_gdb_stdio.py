"""`target remote | SERVER - PROG`: the protocol on stdin/stdout."""
import re

from harness import SERVER, gdb, inferior, line_of

BASIC = inferior("basic")


def test_stdio_transport(procs):
    r = gdb(["target remote | %s - %s" % (SERVER, BASIC), "break marker", "continue",
             "bt", "print counter", "continue"], prog=BASIC)
    out = r.out
    assert re.search(r"Breakpoint 1, marker \(\) at .*basic\.c:%d" % line_of("basic", "marker-body"), out), r
    assert re.search(r"\$1 = 5\b", out), r
    assert re.search(r"\[Inferior 1 \(process \d+\) exited with code 07\]", out), r


def test_stdio_missing_program(procs):
    r = gdb(["target remote | %s - /nonexistent/prog" % SERVER, "info inferiors"])
    assert "/nonexistent/prog" in r.out, r
    assert r.rc != "timeout"
