"""gdbserver's monitor commands, with its words (gdb.server/server-mon.exp): unknown or empty
commands end in an error reply, and the `set` commands for debug output really act."""
import re

from harness import gdb_remote, inferior

BASIC = inferior("basic")


def test_unknown_and_empty_commands_are_errors(procs):
    srv = procs.server(["--once", "{COMM}", BASIC])
    r = gdb_remote(srv, ["monitor", "echo --next--\\n", "monitor no-such-command", "echo --next--\\n",
                         "monitor set debug 2", "echo --next--\\n", "monitor help"], prog=BASIC)
    parts = r.out.split("--next--")
    assert len(parts) == 4, r
    for part in parts[:3]:
        assert re.search(r"Unknown monitor command\.\n\nThe following monitor commands are supported:\n"
                         r"(.*\n)*Protocol error with Rcmd", part), r
    assert "The following monitor commands are supported:" in parts[3], r
    assert "Protocol error" not in parts[3] and "Unknown monitor command" not in parts[3], r


def test_set_commands_say_what_they_did(procs):
    srv = procs.server(["--once", "{COMM}", BASIC])
    r = gdb_remote(srv, ["monitor set debug 1", "monitor set debug 0",
                         "monitor set remote-debug 1", "monitor set remote-debug 0",
                         "monitor set debug-format all", "monitor set debug-format none",
                         "monitor set debug-format timestamp",
                         "monitor set debug-hw-points 1", "monitor set debug-hw-points 0",
                         "monitor set event-loop-debug 1", "monitor set event-loop-debug 0",
                         "echo --next--\\n", "monitor set debug-format colour"], prog=BASIC)
    said = [line for line in r.out.splitlines() if line.endswith(".")]
    assert said[:11] == [
        "Debug output enabled.", "Debug output disabled.",
        "Protocol debug output enabled.", "Protocol debug output disabled.",
        "All extra debug format options enabled.", "All extra debug format options disabled.",
        "Timestamps will be added to debug output.",
        "H/W point debugging output enabled.", "H/W point debugging output disabled.",
        "Event loop debug output enabled.", "Event loop debug output disabled.",
    ], r
    bad = r.out.split("--next--")[1]
    assert re.search(r'Unknown debug-format argument: "colour"\n(.*\n)*Protocol error with Rcmd', bad), r


def test_debug_file_gets_the_debug_output(procs, tmp_path):
    log = tmp_path / "debug.txt"
    srv = procs.server(["--once", "{COMM}", BASIC])
    r = gdb_remote(srv, ["monitor set debug-file %s" % log, "monitor set debug-format timestamp",
                         "monitor set remote-debug 1", "info registers rip", "monitor set remote-debug 0",
                         "monitor set event-loop-debug 1", "info registers rip", "monitor set event-loop-debug 0",
                         "monitor set debug-hw-points 1", "print &global_value", "watch global_value", "continue",
                         "monitor set debug-hw-points 0", "monitor set debug-file",
                         "monitor set remote-debug 1", "monitor set remote-debug 0", "kill"], prog=BASIC)
    assert "Hardware watchpoint 1: global_value" in r.out, r
    text = log.read_text()
    lines = text.splitlines()
    assert lines, r
    assert all(re.match(r"\d+\.\d{6} ", line) or line.startswith("\t") for line in lines), text
    assert re.search(r"\[remote\] .*getpkt", text), text
    assert "[event-loop]" in text, text
    # The watchpoint went in at global_value's address.
    addr = int(re.search(r"\(int \*\) 0x([0-9a-f]+) <global_value>", r.out).group(1), 16)
    assert re.search(r"insert_watchpoint \(addr=0*%x, len=4, type=data-write\)" % addr, text), text
    # After `set debug-file` alone the output goes back to stderr: the second
    # "set remote-debug 0" is not in the file.
    assert text.count("set remote-debug 0".encode().hex()) == 1, text
    assert "set remote-debug 0".encode().hex() in srv.stderr.text, srv.stderr.text
