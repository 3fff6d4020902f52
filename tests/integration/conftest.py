import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "branchstub_only: needs a branchstub feature (btrace, stepbranch, LLDB "
        "breakpoints, bind security, monitor btrace); skipped when the server is gdbserver")


def pytest_report_header(config):
    return "server under test: %s (%s); build: %s" % (
        harness.SERVER, "gdbserver" if harness.IS_GDBSERVER else "branchstub", harness.BUILD)


def pytest_collection_modifyitems(config, items):
    if not harness.IS_GDBSERVER:
        return
    skip = pytest.mark.skip(reason="branchstub only (server under test is gdbserver)")
    for item in items:
        if "branchstub_only" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _server_binary():
    assert os.access(harness.SERVER, os.X_OK), (
        "server under test %s is not built (set BRANCHSTUB_SERVER / BRANCHSTUB_BUILD)"
        % harness.SERVER)


@pytest.fixture
def procs():
    """Starts servers / helper processes for a test, kills them afterwards, and fails the test
    if any process of an inferior is left (stray or zombie)."""
    sp = harness.SessionProcs()
    yield sp
    left = sp.cleanup()
    assert not left, "leftover inferior processes after the test: %r" % (left,)


@pytest.fixture
def heartbeat(tmp_path):
    return str(tmp_path / "heartbeat")


@pytest.fixture(params=["software", "hardware"])
def watch_mode(request):
    """Each watchpoint / hbreak test runs with the emulated (software) watchpoints everywhere,
    and with the debug registers where the probe sees them trap; elsewhere it is skipped with
    the probe's reason (never silently)."""
    mode = request.param
    if mode == "software" and harness.IS_GDBSERVER:
        pytest.skip("gdbserver has no emulated watchpoints")
    if mode == "hardware":
        works, why = harness.debug_registers_trap()
        if not works:
            pytest.skip("debug registers do not trap on this machine: " + why)
    return mode


@pytest.fixture
def mi():
    """Starts GDB/MI sessions (mi_client.MiSession) for a test and closes them afterwards."""
    from mi_client import MiSession
    sessions = []

    def start(prog):
        s = MiSession([prog])
        sessions.append(s)
        return s
    yield start
    for s in sessions:
        s.close()


@pytest.fixture(params=["lldb", "lldb19"])
def lldb_bin(request):
    """The LLDB a CLI test drives: the default one (lldb-16, or BRANCHSTUB_LLDB), and LLDB 19
    where it is installed or unpacked beside (skipped, with the way to get it, elsewhere)."""
    if request.param == "lldb":
        return harness.LLDB
    if not harness.LLDB19:
        pytest.skip("no lldb-19: " + harness.LLDB19_HOWTO)
    if os.path.realpath(harness.LLDB19) == os.path.realpath(harness.LLDB):
        pytest.skip("BRANCHSTUB_LLDB is already LLDB 19 (run as the [lldb] case)")
    return harness.LLDB19
