"""--synthesize-pt (backend/btrace/pt_synth.h): where the CPU has no Intel PT, `record btrace pt`
gets the software history written as the PT stream a CPU would have written, which GDB decodes
with libipt. The proof is GDB's own listings: the instruction and function-call histories GDB
builds from the stream are the ones it builds from the same region recorded as BTS by the
software source (the truth), line by line, with no gap and no decode warning; and GDB's plain
`record btrace`, which asks for PT first, gets PT where the option is given and BTS where not."""
import re

import pytest

from harness import gdb_remote, inferior, server_probe
from test_btrace_patch import HISTORY, LISTINGS, normalized

pytestmark = pytest.mark.branchstub_only


@pytest.fixture(autouse=True)
def _no_pt_hardware():
    """Where the CPU records PT itself, the server uses it and never synthesizes (test_btrace_pt.py)."""
    works, why = server_probe().get("Intel PT", (False, ""))
    if works:
        pytest.skip("this CPU records Intel PT itself; --synthesize-pt is used only where the probe says: " + why)

PT_HISTORY = HISTORY + ["set record btrace pt buffer-size 16777216"]


def region(record):
    return ["break trace_begin", "continue", record, "break trace_end", "continue"] + LISTINGS


def run(procs, source, prog, args, cmds, extra=()):
    srv = procs.server(["--btrace-source=" + source] + list(extra) + ["--once", "{COMM}", prog] + list(args))
    return gdb_remote(srv, PT_HISTORY + cmds + ["monitor btrace status", "kill"], prog=prog, timeout=180).out


def histories(out):
    """The listings after `info record`'s lines (which name the format and its buffer)."""
    lines = normalized(out)
    keep, skipping = [], False
    for line in lines:
        if line.startswith("Active record target") or line.startswith("Recording format") or "Buffer size" in line:
            skipping = True
            continue
        if skipping and (line.startswith("Recorded ") or line.startswith("Replay ")):
            keep.append(line)
            continue
        skipping = False
        keep.append(line)
    return keep


def same(truth, got, what):
    a, b = histories(truth), histories(got)
    if a != b:
        import difflib
        diff = "\n".join(list(difflib.unified_diff(a, b, "bts (software source)", what, lineterm=""))[:80])
        raise AssertionError("%s differs:\n%s" % (what, diff))


@pytest.mark.parametrize("name,args", [("branches", []), ("patchloop", ["300"]), ("patchlibs", ["20"]),
                                        ("bploop", ["400"]), ("branches_signal", [])])
@pytest.mark.parametrize("source", ["patch", "soft"])
def test_gdb_decodes_the_synthesized_stream_to_the_software_history(procs, name, args, source):
    prog = inferior(name)
    if name == "bploop":
        cmds = lambda rec: ["break hit", "continue", "delete", rec, "tbreak loop_done", "continue"] + LISTINGS
    else:
        cmds = region
    truth = run(procs, "soft", prog, args, cmds("record btrace bts"))
    assert "Branch Trace Store" in truth, truth[-3000:]
    pt = run(procs, source, prog, args, cmds("record btrace pt"), ["--synthesize-pt"])
    assert "Recording format: Intel Processor Trace." in pt, pt[-3000:]
    assert "warning" not in pt.lower() and "error" not in pt.lower(), pt[-3000:]
    assert re.search(r"Recorded \d+ instructions in \d+ functions \(0 gaps\)", pt), pt[-3000:]
    same(truth, pt, "pt (synthesized)")


def test_plain_record_btrace_gets_pt_only_with_the_option(procs):
    prog = inferior("branches")
    cmds = ["break trace_begin", "continue", "record btrace", "break trace_end", "continue", "info record"]
    with_pt = run(procs, "patch", prog, [], cmds, ["--synthesize-pt"])
    assert "Recording format: Intel Processor Trace." in with_pt, with_pt[-3000:]
    assert "--synthesize-pt" in with_pt  # monitor btrace status says where the stream comes from
    without = run(procs, "patch", prog, [], cmds)
    assert "Recording format: Branch Trace Store." in without, without[-3000:]


def test_a_history_longer_than_the_buffer_decodes_from_its_oldest_kept_branch(procs):
    """A small PT buffer keeps the newest branches: the stream starts at the target of the
    oldest kept one; GDB decodes it without error, and its end is the software history's end."""
    prog = inferior("patchloop")
    tail = ["set record instruction-history-size 200", "record instruction-history -"]
    cmds = lambda rec, size: ["set record btrace %s buffer-size %d" % (rec.split()[-1], size), "break trace_begin",
                              "continue", rec, "break trace_end", "continue", "info record", "record goto end"] + tail
    truth = run(procs, "soft", prog, ["300"], cmds("record btrace bts", 16 << 20))
    pt = run(procs, "patch", prog, ["300"], cmds("record btrace pt", 4096), ["--synthesize-pt"])
    assert "warning" not in pt.lower() and "error" not in pt.lower(), pt[-3000:]
    n_pt = int(re.search(r"Recorded (\d+) instructions", pt).group(1))
    n_bts = int(re.search(r"Recorded (\d+) instructions", truth).group(1))
    assert 0 < n_pt < n_bts, (n_pt, n_bts)
    listing = lambda out: [l for l in normalized(out) if re.match(r"^\d+\t", l)]
    a = [re.sub(r"^\d+", "", l) for l in listing(truth)]
    b = [re.sub(r"^\d+", "", l) for l in listing(pt)]
    assert a and a[-150:] == b[-150:], (a[-20:], b[-20:])
