"""Ground truth for the btrace / stepbranch tests, derived independently of the server's
tracer: a separate gdb session (against Debian's gdbserver when installed, else the server
under test with no tracing) single-steps the region with `stepi` and records every executed
instruction, the function it belongs to, and every taken branch (new pc != pc + length).
Results are cached per (program, start, end) for the test session."""
import json
import os
import re

import harness

_cache = {}

_SCRIPT = r'''
import gdb, json
def ex(c):
    return gdb.execute(c, to_string=True)
last_stop = [None]
def on_stop(ev):
    last_stop[0] = ev
gdb.events.stop.connect(on_stop)
for c in ("set confirm off", "set pagination off", "set width 0", "set sysroot /",
          "handle SIGUSR1 nostop noprint pass"):
    ex(c)
ex("target remote 127.0.0.1:%(port)d")
marks = {}
for m in %(marks)r:          # breakpoint addresses other tests stop at (not stopped at here)
    o = ex("break " + m)
    marks[m] = int(__import__("re").search(r"at (0x[0-9a-f]+)", o).group(1), 16)
    ex("delete " + __import__("re").search(r"Breakpoint (\d+)", o).group(1))
ex("break %(start)s")
out = ex("break %(end)s")
end = int(__import__("re").search(r"at (0x[0-9a-f]+)", out).group(1), 16)
ex("continue")
ex("delete")
ex("handle SIGUSR1 stop print pass")   # inside the region: see each signal while stepping
pcs, funcs, lens, branches, signals = [], [], [], [], 0
def here():
    f = gdb.selected_frame()
    pc = int(f.pc())
    # btrace's function-call history names real functions, not inlined ones: skip inline frames.
    while f is not None and f.type() == gdb.INLINE_FRAME:
        f = f.older()
    return pc, ((f.name() if f is not None else None) or "??")
pc, fn = here()
deliver = False
while pc != end and len(pcs) < %(limit)d:
    insn = gdb.selected_frame().architecture().disassemble(pc)[0]
    last_stop[0] = None
    o = ex("stepi")
    if isinstance(last_stop[0], gdb.SignalEvent) or "received signal" in o:
        signals += 1          # reported, nothing executed
        deliver = True
        continue
    npc, nfn = here()
    if deliver:               # the signal was delivered: now at the handler's first insn
        deliver = False
        branches.append([pc, npc, "<signal>"])
        pc, fn = npc, nfn
        continue
    pcs.append(pc); funcs.append(fn); lens.append(insn["length"])
    if npc != pc + insn["length"]:
        branches.append([pc, npc, insn["asm"]])
    pc, fn = npc, nfn
print("TRUTH-JSON " + json.dumps({"pcs": pcs, "funcs": funcs, "lens": lens, "branches": branches,
                                   "end": end, "end_func": fn, "signals": signals,
                                   "marks": marks}))
ex("kill")
'''


class Truth:
    def __init__(self, d):
        self.pcs = d["pcs"]
        self.funcs = d["funcs"]
        self.lens = d["lens"]
        self.branches = [tuple(b) for b in d["branches"]]
        self.end = d["end"]
        self.end_func = d["end_func"]
        self.signals = d["signals"]
        self.marks = d.get("marks", {})

    @property
    def count(self):
        """Instructions executed from the start breakpoint to the end breakpoint (excl.)."""
        return len(self.pcs)

    @property
    def start(self):
        return self.pcs[0]

    def call_history(self):
        """Function segments as `record function-call-history` lists them (consecutive
        instructions of one function form one segment), ending with the current function."""
        seq = []
        for f in self.funcs + [self.end_func]:
            if not seq or seq[-1] != f:
                seq.append(f)
        return seq

    def blocks(self):
        """{(start, size): executions}: a block runs from a branch target (or the first pc) to
        the next taken branch; the last one ends right before `end`."""
        out, start = {}, None
        for i, pc in enumerate(self.pcs):
            if start is None:
                start = pc
            nxt = self.pcs[i + 1] if i + 1 < len(self.pcs) else self.end
            if nxt != pc + self.lens[i] or i + 1 == len(self.pcs):
                size = (pc + self.lens[i] - start) if nxt != pc + self.lens[i] else (nxt - start)
                out[(start, size)] = out.get((start, size), 0) + 1
                start = None
        return out

    def taken_branches(self, include_signals=False):
        return [b for b in self.branches if include_signals or b[2] != "<signal>"]


def stepi_truth(prog_name, start="trace_begin", end="trace_end", limit=200000, args=(), marks=()):
    """`args`: the program's arguments; `marks`: functions whose breakpoint addresses to
    report in .marks (as `break NAME` places them)."""
    key = (prog_name, start, end, tuple(args), tuple(marks))
    if key in _cache:
        return _cache[key]
    prog = harness.inferior(prog_name)
    binary = harness.GDBSERVER if os.access(harness.GDBSERVER, os.X_OK) else harness.SERVER
    sp = harness.SessionProcs()
    try:
        srv = sp.server(["--once", "{COMM}", prog] + list(args), binary=binary)
        r = harness.gdb([], prog=prog, timeout=240, prelude=False,
                        pyscript=_SCRIPT % {"port": srv.port, "start": start, "end": end,
                                            "limit": limit, "marks": list(marks)})
    finally:
        sp.cleanup()
    m = re.search(r"^TRUTH-JSON (.*)$", r.out, re.M)
    assert m, "truth run failed:\n%s" % r
    t = Truth(json.loads(m.group(1)))
    assert t.count and t.count < limit, "truth run did not reach %s" % end
    _cache[key] = t
    return t
