"""Signals through the server: SIGUSR1 passed / not passed, SIGSEGV at the faulting line."""
import re

from harness import gdb_remote, inferior, line_of

SIGNALS = inferior("signals")
SEGV = inferior("segv")


def test_sigusr1_pass_nostop(procs):
    srv = procs.server(["--once", "{COMM}", SIGNALS])
    r = gdb_remote(srv, ["handle SIGUSR1 nostop noprint pass", "continue"], prog=SIGNALS)
    assert "exited with code 03" in r.out, r


def test_sigusr1_stop_and_pass(procs):
    srv = procs.server(["--once", "{COMM}", SIGNALS])
    r = gdb_remote(srv, ["handle SIGUSR1 stop print pass", "break on_usr1",
                         "continue", "continue", "print sig_count"] + ["continue"] * 5, prog=SIGNALS)
    out = r.out
    assert len(re.findall(r"Program received signal SIGUSR1, User defined signal 1\.", out)) == 3, r
    assert re.search(r"Breakpoint 1, on_usr1 \(sig=10\)", out), r
    assert re.search(r"\$1 = 0\b", out), r
    assert "exited with code 03" in out, r


def test_sigusr1_nopass(procs):
    srv = procs.server(["--once", "{COMM}", SIGNALS])
    r = gdb_remote(srv, ["handle SIGUSR1 stop print nopass", "continue", "continue",
                         "continue", "continue"], prog=SIGNALS)
    out = r.out
    assert len(re.findall(r"Program received signal SIGUSR1", out)) == 3, r
    assert re.search(r"\[Inferior 1 \(process \d+\) exited normally\]", out), r


def test_sigsegv_at_faulting_line(procs):
    srv = procs.server(["--once", "{COMM}", SEGV])
    line = line_of("segv", "segv")
    r = gdb_remote(srv, ["continue", "bt", "info line *$pc", "kill"], prog=SEGV)
    out = r.out
    assert "Program received signal SIGSEGV, Segmentation fault." in out, r
    assert re.search(r"crash \(\) at .*segv\.c:%d\n%d\s.*LINE:segv" % (line, line), out), r
    assert re.search(r"#1 +0x[0-9a-f]+ in main \(\)", out), r
    assert re.search(r"\[Inferior 1 \(process \d+\) killed\]", out), r


SIGINFO = inferior("siginfo")


def test_siginfo_written_by_gdb_reaches_the_handler(procs):
    """qXfer:siginfo:write: the signal delivered on resume carries what GDB wrote."""
    srv = procs.server(["--once", "{COMM}", SIGINFO])
    r = gdb_remote(srv, [
        "continue",
        "p $_siginfo._sifields._sigfault.si_addr = 0x666", "p $_siginfo.si_errno = 666",
        "p $_siginfo.si_code = 999", "p $_siginfo.si_errno",
        "break handled", "continue",
        "p seen_errno", "p seen_code", "p seen_addr", "p seen_signo", "kill"], prog=SIGINFO)
    out = r.out
    assert "Program received signal SIGSEGV" in out, r
    assert "Unable to write siginfo" not in out, r
    assert re.search(r"\$4 = 666\b", out), r                       # read back from the server
    assert re.search(r"Breakpoint 1, handled \(\)", out), r
    assert re.search(r"\$5 = 666\b", out), r
    assert re.search(r"\$6 = 999\b", out), r
    assert re.search(r"\$7 = \(void \* volatile\) 0x666\b", out), r
    assert re.search(r"\$8 = 11\b", out), r


def test_sigio_stops_when_gdb_says_stop(procs):
    """QPassSignals lists GDB numbers: GDB_SIGNAL_POLL (passed by default) is not SIGIO."""
    srv = procs.server(["--once", "{COMM}", SIGINFO, "io"])
    r = gdb_remote(srv, ["handle SIGIO stop print", "continue", "info program", "kill"], prog=SIGINFO)
    assert "Program received signal SIGIO" in r.out, r
    assert "terminated" not in r.out, r


def test_sigio_passed_silently_by_default(procs):
    srv = procs.server(["--once", "{COMM}", SIGINFO, "io"])
    r = gdb_remote(srv, ["continue"], prog=SIGINFO)
    assert "Program terminated with signal SIGIO" in r.out, r
    assert "received signal" not in r.out, r
