"""A launched program inherits nothing of the server's: not its sockets, not its perf events or
trace files (issue 10). gdbserver opens everything close-on-exec; so must we."""
import re

from harness import gdb_remote, inferior

FDLIST = inferior("fdlist")


def fd_lines(text):
    """The descriptors fdlist reported (the server's own stdout is the program's)."""
    end = text.index("FDLIST-END")
    return re.findall(r"^FD (\d+) -> (.*)$", text[:end], re.M)


def test_second_program_of_extended_session_inherits_no_descriptor(procs, tmp_path):
    # The harness starts the server with only 0, 1 and 2 open, so anything else fdlist sees was
    # opened by the server (its listening and client sockets, signalfd, epoll, perf events...).
    branches = inferior("branches")
    srv = procs.server(["--multi", "--debug-file=%s" % (tmp_path / "debug.log"), "{COMM}"])
    r = gdb_remote(srv, [
        "set remote exec-file " + branches, "file " + branches,
        "break trace_begin", "run", "record btrace bts", "next", "info record",
        "kill", "delete",
        "set remote exec-file " + FDLIST, "file " + FDLIST, "run",
        "monitor exit"], extended=True, timeout=120)
    assert "exited normally" in r.out, r
    assert srv.stdout.wait_for(r"FDLIST-END", 10), srv.stdout.text
    assert fd_lines(srv.stdout.text) == [], srv.stdout.text


def test_program_of_stdio_session_inherits_no_descriptor(procs):
    # stdio: the protocol runs on the server's stdin/stdout; the program gets /dev/null and
    # stderr, and no copy of the protocol pipes.
    import subprocess
    from harness import GDB, GDB_PRELUDE, SERVER
    argv = [GDB, "-nx", "-batch"]
    # extended: the program starts after the protocol is up (a first program would start before)
    for c in GDB_PRELUDE + ["target extended-remote | %s --multi -" % SERVER,
                            "set remote exec-file " + FDLIST, "file " + FDLIST, "run"]:
        argv += ["-ex", c]
    # the program's stdout is the server's stderr, which GDB passes on to its own
    out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60).stdout
    assert "FDLIST-END" in out, out
    assert fd_lines(out) == [], out
