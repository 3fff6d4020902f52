# branchstub LLDB commands (LLDB 14 and 16):
#
#     (lldb) command script import /path/to/branchstub/scripts/lldb/branchstub_lldb.py
#     (lldb) stepbranch [N]            step the selected thread to its N-th next taken branch
#     (lldb) stepbranch --client [N]   the same with LLDB's own instruction steps (any server)
#
# How it works (see docs/stepbranch.md, "LLDB"): LLDB performs the resume itself.
#   * the script asks branchstub, with `process plugin packet send
#     Qbranchstub:stepbranch-next:<tid>,<N>`, to turn LLDB's next single step of the thread
#     into a run to its N-th next taken branch;
#   * then it runs `thread step-inst`: LLDB steps, gets a normal stop with the new pc and
#     refreshes everything (registers, frames, memory), and so does lldb-vscode;
#   * when the command waits for the stop (synchronous mode, `lldb -b`, scripts), it asks
#     `qbranchstub:stepbranch-last` for the branch taken and prints it.
#   * servers without the request (lldb-server, gdbserver answer it with an empty reply): a
#     scripted thread plan that single-steps through LLDB itself until the PC leaves the
#     straight line.

import re
import shlex

import lldb

def _run(debugger, command):
    ro = lldb.SBCommandReturnObject()
    debugger.GetCommandInterpreter().HandleCommand(command, ro)
    return ro.Succeeded(), (ro.GetOutput() or ""), (ro.GetError() or "")


def _send_packet(debugger, packet):
    ok, out, err = _run(debugger, "process plugin packet send %s" % packet)
    if not ok:
        raise RuntimeError("process plugin packet send failed: %s" % err.strip())
    m = re.search(r"^response: ?(.*)$", out, re.M)
    return m.group(1).strip() if m else ""


def _parse_stop(text):
    info = {"kind": text[:1] if text else "", "signal": None, "fields": {}}
    if info["kind"] in ("T", "S") and len(text) >= 3:
        info["signal"] = int(text[1:3], 16)
        for item in text[3:].split(";"):
            if item:
                k, _, v = item.partition(":")
                info["fields"][k] = v
    return info


def _symbolize(target, addr):
    a = target.ResolveLoadAddress(addr)
    sym = a.GetSymbol()
    if sym and sym.IsValid() and sym.GetName():
        start = sym.GetStartAddress().GetLoadAddress(target)
        return "<%s+%d>" % (sym.GetName(), addr - start)
    return ""


def _branch_line(target, frm, to):
    s = _symbolize(target, to)
    return "branch 0x%x -> 0x%x%s" % (frm, to, (" " + s) if s else "")


class StepToBranchPlan:
    """Scripted thread plan: instruction steps until the PC leaves the straight line."""

    def __init__(self, thread_plan, *args):
        self.plan = thread_plan
        self.thread = thread_plan.GetThread()
        self.target = self.thread.GetProcess().GetTarget()
        self.remaining = _pending_client_count.pop() if _pending_client_count else 1
        self.lines = _client_lines
        self._arm()

    def _arm(self):
        frame = self.thread.GetFrameAtIndex(0)
        self.pc = frame.GetPC()
        insns = self.target.ReadInstructions(lldb.SBAddress(self.pc, self.target), 1)
        self.next_pc = self.pc + (insns.GetInstructionAtIndex(0).GetByteSize()
                                  if insns.GetSize() else 1)

    def explains_stop(self, event):
        return self.thread.GetStopReason() == lldb.eStopReasonTrace

    def should_stop(self, event):
        pc = self.thread.GetFrameAtIndex(0).GetPC()
        if pc != self.next_pc:
            self.lines.append(_branch_line(self.target, self.pc, pc))
            self.remaining -= 1
            if self.remaining <= 0:
                self.plan.SetPlanComplete(True)
                return True
        self._arm()
        return False

    def should_step(self):
        return True

    def is_stale(self):
        return False


_pending_client_count = []
_client_lines = []


def _client_stepbranch(debugger, count, result):
    _pending_client_count[:] = [count]
    del _client_lines[:]
    ok, out, err = _run(debugger, "thread step-scripted -C %s.StepToBranchPlan" % __name__)
    for line in _client_lines:
        result.AppendMessage(line)
    if not ok:
        result.SetError(err.strip())
        return
    result.AppendMessage(out.rstrip())


def _breakpoint_at_pc(target, thread):
    """The thread's pc when an enabled breakpoint location of LLDB's is there (LLDB lifts it to
    step over it), else None."""
    pc = thread.GetFrameAtIndex(0).GetPC()
    for i in range(target.GetNumBreakpoints()):
        bp = target.GetBreakpointAtIndex(i)
        if not bp.IsEnabled():
            continue
        for j in range(bp.GetNumLocations()):
            loc = bp.GetLocationAtIndex(j)
            if loc.IsEnabled() and loc.GetLoadAddress() == pc:
                return pc
    return None


def stepbranch(debugger, command, exe_ctx, result, internal_dict):
    """stepbranch [--client] [N]: run the selected thread until it has taken N branches."""
    try:
        args = shlex.split(command)
    except ValueError as e:
        result.SetError(str(e))
        return
    client = "--client" in args
    args = [a for a in args if a != "--client"]
    try:
        count = int(args[0], 0) if args else 1
    except ValueError:
        result.SetError("usage: stepbranch [--client] [N]")
        return
    if count < 1:
        result.SetError("stepbranch: N must be at least 1")
        return
    process = exe_ctx.GetProcess()
    thread = exe_ctx.GetThread()
    if not process.IsValid() or process.GetState() != lldb.eStateStopped or not thread.IsValid():
        result.SetError("stepbranch: needs a stopped process with a selected thread")
        return
    target = process.GetTarget()
    if client:
        _client_stepbranch(debugger, count, result)
        return

    packet = "Qbranchstub:stepbranch-next:%x,%d" % (thread.GetThreadID(), count)
    lifted = _breakpoint_at_pc(target, thread) if count > 1 else None
    if lifted is not None:
        # LLDB takes it out for its step over it: the server keeps it in for the rest of the
        # run, so a loop back to it still stops there.
        packet += ";bp:%x" % lifted
    reply = _send_packet(debugger, packet)
    if reply == "":
        result.AppendMessage("stepbranch: the server does not offer stepbranch (it does not know "
                             "Qbranchstub:stepbranch-next); stepping through LLDB instead.")
        _client_stepbranch(debugger, count, result)
        return
    if reply != "OK":
        result.SetError("stepbranch: the server refused: %s"
                        % (reply[2:] if reply.startswith("E.") else reply))
        return
    # LLDB's own instruction step, which the server runs to the branch: LLDB (and lldb-vscode)
    # see an ordinary stop. In asynchronous mode the command returns at once and the stop is
    # reported as every stop is.
    ok, out, err = _run(debugger, "thread step-inst")
    if out.strip():
        result.AppendMessage(out.rstrip())
    if not ok:
        result.SetError(err.strip() or "thread step-inst failed")
        return
    if process.GetState() != lldb.eStateStopped:
        return  # asynchronous: still running, or gone (LLDB reports either)
    stop = _parse_stop("T05" + _send_packet(debugger, "qbranchstub:stepbranch-last"))
    f = stop["fields"]
    if "branch-from" in f and "branch-to" in f:
        result.AppendMessage(_branch_line(target, int(f["branch-from"], 16), int(f["branch-to"], 16)))
    else:
        result.AppendMessage("stepbranch: stopped before the branch was taken (%s)."
                             % (thread.GetStopDescription(256) or "see the stop reason"))


def __lldb_init_module(debugger, internal_dict):
    debugger.HandleCommand(
        'command script add -f %s.stepbranch stepbranch' % __name__)
