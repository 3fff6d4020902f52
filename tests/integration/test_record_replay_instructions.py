"""branchstub record / replay of the instructions whose results differ between runs and that
no fault catches on every CPU (docs/record-replay.md, "Instructions"): cpuid, rdrand, rdseed,
rdpid. The recording takes what they gave, the replay gives it back, whichever engine counts
(block patching or the software engine), on a continue, a stepi over one and a reverse-stepi
back; a recorded input that differs from the replay's is a divergence, said with the event.
The values differ from run to run natively (rdrand's always, cpuid leaf 1's APIC id with the
CPU the program ran on), so a replay that ran them on the CPU would print other values. The
trace keeps the recording CPU's features and XCR0: a replay refuses a CPU that saves more
register state (xsave areas sized from the recorded cpuid would overflow) and warns of
features this CPU lacks."""
import re
import struct
import subprocess

import pytest

from harness import SERVER, gdb_remote, inferior
from test_record_replay import edit_first_event, printed
from test_record_replay_counting import record, replay

pytestmark = pytest.mark.branchstub_only

PROG = inferior("nondet_prog")
INSTRUCTION_EVENT = 5
ARGS_AT = 32  # position, branches, pc, nr: then args[6]


def gdb_values(r):
    return re.findall(r"^\$\d+ = (.*)$", r.out, re.M)


def recorded(tmp_path, name="trace", source=None):
    p, trace = record(tmp_path, [PROG], name, source=source)
    assert p.returncode == 0, p.stderr
    return printed(p.stdout.decode()), trace


@pytest.mark.parametrize("source", [None, "soft"])
def test_replay_gives_the_recorded_results(procs, tmp_path, source):
    rec, trace = recorded(tmp_path, source=source)
    r = replay(procs, trace, PROG, ["break values_ready", "continue", "print vendor", "print leaf1_ebx",
                                    "print/u rnd", "print/u seed", "print/u pid_value", "continue"], source=source)
    got = gdb_values(r)
    assert len(got) == 5, r
    assert got[0] == '"%s"' % rec["vendor"], r
    assert got[1] == rec["leaf1_ebx"], r
    if rec["rdrand"] == "1":
        assert got[2] == "{%s, %s, %s}" % (rec["rnd0"], rec["rnd1"], rec["rnd2"]), r
    if rec["rdseed"] == "1":
        assert got[3] == rec["seed"], r
    assert "No more reverse-execution history." in r.out, r


def test_stepping_over_rdrand_and_back_gives_the_recorded_value(procs, tmp_path):
    rec, trace = recorded(tmp_path)
    if rec["rdrand"] != "1":
        pytest.skip("this CPU has no rdrand (CPUID.1:ECX[30] clear)")
    cmds = ["break *rdrand_site", "continue", "stepi", "print/u $rax", "print ($eflags & 1)",
            "reverse-stepi", "print $pc == &rdrand_site", "stepi", "print/u $rax",
            "continue", "stepi", "print/u $rax"]
    r = replay(procs, trace, PROG, cmds + ["delete", "continue"])
    got = gdb_values(r)
    assert got == [rec["rnd0"], "1", "1", rec["rnd0"], rec["rnd1"]], r


def test_a_different_input_is_a_divergence(procs, tmp_path):
    """The first recorded cpuid is said to have read leaf 0x4000 instead: the replay stops there
    and says which event, what was recorded and what the program did."""
    _, trace = recorded(tmp_path)

    def edit(events, kind, body):
        if kind != INSTRUCTION_EVENT:
            return None
        nr, = struct.unpack_from("<q", events, body + 24)
        assert nr == 0  # the first is ld.so's cpuid
        struct.pack_into("<Q", events, body + ARGS_AT + 4 * 8, 0x4000)
        pc, = struct.unpack_from("<Q", events, body + 16)
        return pc

    pc = edit_first_event(trace, edit)
    assert pc is not None
    srv = procs.server(["replay", "--once", "{COMM}", str(trace)])
    r = gdb_remote(srv, ["continue", "print $pc"], prog=PROG)
    said = re.search(r"divergence at event \d+ of \d+: cpuid at pc (0x[0-9a-f]+), branch \d+: "
                     r"expected input 0x4000, saw 0x[0-9a-f]+", r.out + srv.stderr.text)
    assert said and int(said.group(1), 16) == pc, (r, srv.stderr.text)
    assert "SIGTRAP" in r.out, r
    assert "$1 = (void (*)()) 0x%x" % pc in r.out, r


def edit_header(trace, key, value):
    header = (trace / "header").read_text()
    header, n = re.subn(r"^%s .*$" % key, "%s %s" % (key, value), header, flags=re.M)
    assert n == 1, header
    (trace / "header").write_text(header)


def test_a_cpu_saving_more_register_state_is_refused(tmp_path):
    """XCR0 says which register states xsave writes; the program sized its save areas from the
    recorded cpuid. A recording whose CPU saved only x87 and SSE state cannot replay here."""
    _, trace = recorded(tmp_path)
    assert re.search(r"^xcr0 [0-9a-f]+$", (trace / "header").read_text(), re.M)
    edit_header(trace, "xcr0", "3")
    p = subprocess.run([SERVER, "replay", "--once", "127.0.0.1:0", str(trace)], capture_output=True, timeout=30)
    err = p.stderr.decode()
    assert p.returncode != 0 and "Listening" not in err, err
    assert re.search(r"recorded on a CPU whose XCR0 is 0x3 \(\w+ \d+ \d+ \d+\); this one's is 0x[0-9a-f]+: "
                     r"the program sized its register save areas", err), err


def test_features_this_cpu_lacks_are_said_before_the_replay(procs, tmp_path):
    rec, trace = recorded(tmp_path)
    words = re.search(r"^cpu-features (.*)$", (trace / "header").read_text(), re.M).group(1).split()
    assert len(words) == 7
    ecx7 = int(words[3], 16)
    bit = next(b for b in range(31) if not ecx7 >> b & 1)  # a CPUID.7:ECX feature this CPU lacks
    words[3] = "%08x" % (ecx7 | 1 << bit)
    edit_header(trace, "cpu-features", " ".join(words))
    srv = procs.server(["replay", "--once", "{COMM}", str(trace)])
    assert re.search(r"warning: .* was recorded on \w+ \d+ \d+ \d+, which had features this CPU lacks "
                     r"\(CPUID.7:ECX bits %#x\)" % (1 << bit), srv.stderr.text), srv.stderr.text
    r = gdb_remote(srv, ["break values_ready", "continue", "print leaf1_ebx", "continue", "continue"], prog=PROG)
    assert "$1 = %s" % rec["leaf1_ebx"] in r.out, r
    assert "divergence" not in r.out, r
