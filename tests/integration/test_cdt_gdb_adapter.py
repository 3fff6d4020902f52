"""Eclipse CDT's GDB debug adapter (npm cdt-gdb-adapter, what VS Code's "CDT GDB Debug Adapter
Extension" and Theia run) against the server: the adapter drives the real gdb over GDB/MI, as
an IDE does, with branchstub as its remote target (`"target": {"type": "remote", ...}`).
Driven over the adapter's stdio by dap_client.DapSession: initialize, attach, breakpoints,
stack, scopes and variables, next / stepIn / stepOut, branch history and stepbranch typed in
the debug console ('>' sends a line to gdb), disconnect.

The adapter comes from npm's registry (scripts/cdt-gdb-adapter.sh; scripts/setup-deps.sh
installs it); where it is absent these tests skip and say so."""
import os
import re
import shutil

import pytest

from dap_client import DapSession
from harness import (GDB, GDB_SCRIPT, REPO, inferior, line_of,
                     wait_gone, wait_until)

BASIC = inferior("basic")
BASIC_SRC = os.path.join(REPO, "tests", "inferiors", "basic.c")
HOWTO = "bash scripts/cdt-gdb-adapter.sh --setup-only (scripts/setup-deps.sh does it)"


def find_adapter():
    path = os.environ.get("BRANCHSTUB_CDT_ADAPTER")
    if path:
        return path
    prefixes = [os.environ.get("CDT_GDB_ADAPTER_PREFIX"), "/opt/cdt-gdb-adapter",
                os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                             "branchstub", "cdt-gdb-adapter")]
    for p in filter(None, prefixes):
        js = os.path.join(p, "node_modules", "cdt-gdb-adapter", "dist", "debugTargetAdapter.js")
        if os.path.isfile(js):
            return js
    return None


ADAPTER = find_adapter()
NODE = shutil.which("node") or shutil.which("nodejs")


@pytest.fixture
def cdt(procs):
    """cdt(server_args) -> (server, DapSession attached to it, stopped at nothing yet)."""
    if not ADAPTER or not NODE:
        pytest.skip("no cdt-gdb-adapter (or node): " + HOWTO)
    sessions = []

    def start(server_args, prog=BASIC):
        srv = procs.server(server_args)
        d = DapSession([NODE, ADAPTER], timeout=60)
        sessions.append(d)
        d.request("initialize", {"clientID": "branchstub-tests", "adapterID": "gdbtarget",
                                 "linesStartAt1": True, "columnsStartAt1": True,
                                 "pathFormat": "path"})
        # The launch.json of an attach to a running gdbserver-style server (docs/ide.md).
        seq = d.send("attach", {"gdb": GDB, "program": prog,
                                "target": {"type": "remote",
                                           "parameters": ["127.0.0.1:%d" % srv.port]}})
        d.wait_event("initialized")
        d.pending_attach = seq
        return srv, d
    yield start
    for d in sessions:
        d.close()


def break_and_start(d, line):
    """Source breakpoint at `line` of basic.c, configurationDone (the program runs), and the
    first stop."""
    bps = d.request("setBreakpoints", {"source": {"path": BASIC_SRC},
                                       "breakpoints": [{"line": line}]})["breakpoints"]
    assert bps[0]["verified"] and bps[0]["line"] == line, bps
    d.request("configurationDone")
    d.response(d.pending_attach)
    return d.wait_event("stopped")


def frames(d, tid):
    return d.request("stackTrace", {"threadId": tid})["stackFrames"]


def locals_of(d, frame_id):
    scopes = d.request("scopes", {"frameId": frame_id})["scopes"]
    local = next(s for s in scopes if s["name"] == "Local")
    return {v["name"]: v["value"]
            for v in d.request("variables", {"variablesReference": local["variablesReference"]})["variables"]}


def console(d, frame_id, line):
    """A line typed in the debug console, sent to gdb ('>'); returns gdb's output to it."""
    before = len(d.output())
    d.request("evaluate", {"expression": ">" + line, "frameId": frame_id, "context": "repl"})
    return d.output()[before:]


def step(d, request, tid):
    d.request(request, {"threadId": tid})
    stop = d.wait_event("stopped", pred=lambda b: b.get("reason") == "step")
    return frames(d, tid)[0]


@pytest.mark.branchstub_only
def test_cdt_breakpoint_stack_variables_and_steps(cdt):
    """The IDE's view at a breakpoint: compute() called from main, its argument and local;
    next, stepOut and stepIn land where gdb says; the program's exit reaches the IDE."""
    srv, d = cdt(["--once", "{COMM}", BASIC])
    stop = break_and_start(d, line_of("basic", "compute-body"))
    assert stop["reason"] == "breakpoint", stop
    tid = stop["threadId"]
    fr = frames(d, tid)
    assert [(f["name"], f["line"]) for f in fr[:2]] == [
        ("compute", line_of("basic", "compute-body")), ("main", line_of("basic", "loop-body"))], fr
    assert locals_of(d, fr[0]["id"]) == {"x": "0", "doubled": "0"}
    top = step(d, "next", tid)
    assert (top["name"], top["line"]) == ("compute", line_of("basic", "counter-inc")), top
    assert locals_of(d, top["id"])["doubled"] == "0"
    top = step(d, "stepOut", tid)
    assert top["name"] == "main", top
    d.request("setBreakpoints", {"source": {"path": BASIC_SRC}, "breakpoints": []})
    d.request("setBreakpoints", {"source": {"path": BASIC_SRC},
                                 "breakpoints": [{"line": line_of("basic", "call-marker")}]})
    d.request("continue", {"threadId": tid})
    stop = d.wait_event("stopped", pred=lambda b: b.get("reason") == "breakpoint")
    top = step(d, "stepIn", tid)
    assert (top["name"], top["line"]) == ("marker", line_of("basic", "marker-body")), top
    d.request("setBreakpoints", {"source": {"path": BASIC_SRC}, "breakpoints": []})
    d.request("continue", {"threadId": tid})
    d.wait_event("terminated", timeout=30)   # this adapter says the exit code in the console
    assert re.search(r"\[Inferior 1 \(process \d+\) exited with code 07\]", d.output()), d.output()[-500:]
    assert srv.wait_exit(10) is not None


@pytest.mark.branchstub_only
def test_cdt_branch_history_and_stepbranch_in_the_debug_console(cdt):
    """What an IDE user of this adapter types in the debug console: `record btrace`, then
    GDB's function-call history of the branches the server recorded, the server's own
    status, and the stepbranch command of scripts/gdb/branchstub.py."""
    srv, d = cdt(["--once", "{COMM}", BASIC])
    stop = break_and_start(d, line_of("basic", "compute-body"))
    tid = stop["threadId"]
    fid = frames(d, tid)[0]["id"]
    console(d, fid, "record btrace")
    d.request("continue", {"threadId": tid})
    d.wait_event("stopped", pred=lambda b: b.get("reason") == "breakpoint")
    fid = frames(d, tid)[0]["id"]
    assert locals_of(d, fid)["x"] == "1"
    out = console(d, fid, "record function-call-history")
    assert re.search(r"^1\tcompute\n2\tmain\n3\tcompute$", out, re.M), out
    out = console(d, fid, "monitor btrace status")
    assert re.search(r"^Thread \d+: recording", out, re.M), out
    console(d, fid, "record stop")
    console(d, fid, "source " + GDB_SCRIPT)
    before = len(d.output())
    console(d, fid, "stepbranch")
    # It ends in an ordinary stop, which the adapter reports; gdb's lines about it follow.
    d.wait_event("stopped", pred=lambda b: b.get("reason") != "breakpoint")
    # compute()'s next taken branch is its return into main, after the call.
    branch = re.compile(r"^branch 0x[0-9a-f]+ -> (0x[0-9a-f]+) <main\+\d+>$", re.M)
    wait_until(lambda: branch.search(d.output()[before:]), 10, "stepbranch's report")
    to = int(branch.search(d.output()[before:]).group(1), 16)
    top = frames(d, tid)[0]
    assert (top["name"], top["line"]) == ("main", line_of("basic", "loop-body")), top
    assert int(top["instructionPointerReference"], 16) == to, top
    d.request("disconnect", {})
    assert srv.wait_exit(10) is not None


@pytest.mark.branchstub_only
def test_cdt_disconnect_kills_the_launched_program(cdt):
    """Ending the IDE session (disconnect) ends a program the server launched, as with
    gdbserver, and the --once server exits."""
    srv, d = cdt(["--once", "{COMM}", BASIC])
    stop = break_and_start(d, line_of("basic", "compute-body"))
    inferior_pid = int(console(d, frames(d, stop["threadId"])[0]["id"],
                               "info inferiors").split("process ")[1].split()[0])
    d.request("disconnect", {})
    assert srv.wait_exit(10) is not None
    wait_gone(inferior_pid)


@pytest.mark.branchstub_only
def test_cdt_reverse_execution_on_a_replay(cdt, tmp_path):
    """An IDE on a replay (docs/ide.md): the adapter attaches to `branchstub replay`, stops at a
    source breakpoint, and the user's `reverse-continue` / `reverse-step` typed in the debug
    console bring the program back, which the adapter reports as ordinary stops with the
    variables as they were."""
    import subprocess
    from harness import SERVER
    prog = inferior("reverse_prog")
    src = os.path.join(REPO, "tests", "inferiors", "reverse_prog.c")
    rec = subprocess.run([SERVER, "record", "-o", str(tmp_path / "t"), prog], capture_output=True, timeout=120,
                         cwd=str(tmp_path))
    assert rec.returncode == 0, rec.stderr
    srv, d = cdt(["replay", "--once", "{COMM}", str(tmp_path / "t")], prog=prog)
    line = line_of("reverse_prog", "bump-line")
    bps = d.request("setBreakpoints", {"source": {"path": src}, "breakpoints": [{"line": line}]})["breakpoints"]
    assert bps[0]["verified"], bps
    d.request("configurationDone")
    d.response(d.pending_attach)
    tid = d.wait_event("stopped")["threadId"]
    for _ in range(2):
        d.request("continue", {"threadId": tid})
        d.wait_event("stopped", pred=lambda b: b.get("reason") == "breakpoint")
    fid = frames(d, tid)[0]["id"]
    assert locals_of(d, fid)["by"] == "3"
    console(d, fid, "reverse-continue")
    d.wait_event("stopped")
    fid = frames(d, tid)[0]["id"]
    assert locals_of(d, fid)["by"] == "2"
    out = console(d, fid, "print counter")
    assert re.search(r"= 1$", out, re.M), out
    console(d, fid, "reverse-finish")
    d.wait_event("stopped")
    top = frames(d, tid)[0]
    assert (top["name"], top["line"]) == ("main", line_of("reverse_prog", "loop-line")), top
    d.request("disconnect", {})
    assert srv.wait_exit(10) is not None
