"""The command line and start-up messages, as gdbserver's (GDB's testsuite waits for these
exact words): unknown options, hosts that do not resolve, COMM --attach PID, a program name
relative to the current directory, the stdio transport's message, --selftest, the TEST ONLY
options that only the test build has, and the inferior's working directory with a tilde."""
import os
import re
import subprocess

import pytest

from harness import (IS_GDBSERVER, RUNNING_STATES, SERVER, free_port, gdb_remote, inferior, line_of,
                     proc_state, wait_heartbeat)

BASIC = inferior("basic")
SLEEPER = inferior("sleeper")


def run_server(procs, args, timeout=20, **kw):
    """A server that is expected to exit by itself: (returncode, stderr)."""
    p = procs.spawn([SERVER] + args, **kw)
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail("server %r did not exit within %ss" % (args, timeout))
    return p.returncode, err.decode("utf-8", "replace")


def test_unknown_option_is_refused(procs):
    rc, err = run_server(procs, ["--once", "--no-such-option", "127.0.0.1:%d" % free_port(), BASIC])
    assert rc == 1, err
    assert err == "Unknown argument: --no-such-option\n", err


@pytest.mark.branchstub_only
@pytest.mark.parametrize("option", ["--test-bts-ring=/tmp/ring", "--test-singleblock"])
def test_shipped_binary_has_no_test_feeds(procs, option):
    """The TEST ONLY options exist only in the test build (tests/support): the shipped binary
    refuses them as it refuses any option it does not know, whatever the environment says."""
    rc, err = run_server(procs, ["--once", option, "127.0.0.1:%d" % free_port(), BASIC],
                         env=dict(os.environ, BRANCHSTUB_TEST_ONLY="1"))
    assert rc == 1, err
    assert err == "Unknown argument: %s\n" % option, err


@pytest.mark.parametrize("host", ["tcp8:123", "udp123:::", "garbage"])
def test_host_that_does_not_resolve(procs, host):
    comm = "%s:%d" % (host, free_port())
    rc, err = run_server(procs, ["--once", comm, BASIC])
    assert rc == 1, err
    assert re.search(r"^%s: cannot resolve name: \S.*\nExiting\n" % re.escape(comm), err, re.M), err
    assert "Process " not in err, err  # nothing was started


def test_attach_after_comm(procs, heartbeat):
    sleeper, pid = procs.spawn_sleeper(heartbeat)
    srv = procs.server(["--once", "{COMM}", "--attach", str(pid)])
    r = gdb_remote(srv, ["info threads", "detach"], prog=SLEEPER)
    assert re.search(r"^\* 1 +Thread %d\.%d " % (pid, pid), r.out, re.M), r
    assert re.search(r"\[Inferior 1 \(process %d\) detached\]" % pid, r.out), r
    first = wait_heartbeat(heartbeat)
    wait_heartbeat(heartbeat, after=first)
    assert sleeper.poll() is None and proc_state(pid) in RUNNING_STATES


def test_program_name_in_current_directory(procs):
    # Started as "basic" from its own directory: that file, not a PATH lookup.
    here, name = os.path.split(BASIC)
    srv = procs.server(["--once", "{COMM}", name], cwd=here)
    assert re.search(r"Process %s created" % re.escape(BASIC), srv.stderr.text), srv.stderr.text
    r = gdb_remote(srv, ["break marker", "continue", "continue"], prog=BASIC)
    assert re.search(r"Breakpoint 1, marker \(\) at .*basic\.c:%d" % line_of("basic", "marker-body"), r.out), r
    assert re.search(r"\[Inferior 1 \(process \d+\) exited with code 07\]", r.out), r


def test_stdio_says_stdin_stdout_redirected(procs, tmp_path):
    rc, err = run_server(procs, ["stdio", "non-existing-program"], cwd=str(tmp_path))
    assert rc == 1, err
    # The order non-existing-program.exp waits for.
    assert re.search(r"stdin/stdout redirected\n(.*\n)*.*exec: non-existing-program: not found\n"
                     r"During startup program exited with code 127\.\nExiting\n", err), err


@pytest.mark.branchstub_only
def test_selftest(procs):
    rc, err = run_server(procs, ["--selftest"])
    assert rc == 0, err
    m = re.search(r"^Ran (\d+) unit tests, 0 failed$", err, re.M)
    assert m and int(m.group(1)) > 0, err
    assert len(re.findall(r"^Running selftest ", err, re.M)) == int(m.group(1)), err
    rc, err = run_server(procs, ["--selftest=framing"])
    assert rc == 0 and re.search(r"^Ran 1 unit tests, 0 failed$", err, re.M), err
    rc, err = run_server(procs, ["--selftest="])
    assert rc == 1 and err == "Error: selftest filter is empty.\n", err


def test_working_directory_with_tilde(procs, tmp_path):
    home = tmp_path / "home"
    (home / "sub").mkdir(parents=True)
    srv = procs.server(["--once", "--multi", "{COMM}"], env=dict(os.environ, HOME=str(home)))
    r = gdb_remote(srv, ["set cwd ~/sub", "set remote exec-file /bin/pwd", "run"],
                   extended=True, prog="/bin/pwd")
    assert re.search(r"\[Inferior 1 \(process \d+\) exited normally\]", r.out), r
    srv.stdout.wait_for(r"\n", 10)
    assert srv.stdout.text.strip() == str(home / "sub"), (srv.stdout.text, r)


def test_working_directory_of_unknown_user(procs):
    srv = procs.server(["--once", "--multi", "{COMM}"])
    r = gdb_remote(srv, ["set cwd ~no-such-user-bs/x", "set remote exec-file /bin/pwd", "run"],
                   extended=True, prog="/bin/pwd")
    # gdbserver answers E01 (its stderr says why), branchstub E.<why>: GDB says the same.
    assert 'Running "/bin/pwd" on the remote target failed' in r.out, r
    assert "exited" not in r.out, r
