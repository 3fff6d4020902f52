# branchstub LLDB commands (LLDB 14 and 16):
#
#     (lldb) command script import /path/to/branchstub/scripts/lldb/branchstub_lldb.py
#     (lldb) stepbranch [N]            step the selected thread to its N-th next taken branch
#     (lldb) stepbranch --client [N]   the same with LLDB's own instruction steps (any server)
#
# How LLDB is kept consistent (see docs/stepbranch.md, "LLDB"):
#   * the server does the stepping: `process plugin packet send stepbranch[:N]`;
#   * LLDB did not see that resume, so afterwards the script
#       - writes the new PC from the stop reply back with `register write pc ...`: the
#         value is unchanged on the target, but LLDB then throws away the thread's
#         register context and stack frames (Thread::Flush) and reads fresh ones;
#       - turns LLDB's memory cache off until the next real stop (a stop hook turns it
#         back on; LLDB clears the cache at every stop), so stack and data reads are fresh.
#   * servers without the packet (lldb-server, gdbserver): a scripted thread plan that
#     single-steps through LLDB itself until the PC leaves the straight line.

import re
import shlex

import lldb

_MEMCACHE_SETTING = "target.process.disable-memory-cache"
_state = {"memcache_disabled_by_us": False, "hook_installed": False}


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


def _le_hex_to_int(h):
    return int.from_bytes(bytes.fromhex(h), "little")


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


def _show_where(debugger, result):
    ok, out, err = _run(debugger, "frame select 0")
    result.AppendMessage((out or err).rstrip())


class _ReenableMemoryCache:
    """Stop hook: LLDB has just cleared its memory cache for a real stop; use it again."""

    def __init__(self, target, extra_args, internal_dict):
        self.target = target

    def handle_stop(self, exe_ctx, stream):
        if _state["memcache_disabled_by_us"]:
            _state["memcache_disabled_by_us"] = False
            _run(self.target.GetDebugger(), "settings set %s false" % _MEMCACHE_SETTING)
        return True


def _stale_memory_cache(debugger):
    ok, out, _ = _run(debugger, "settings show %s" % _MEMCACHE_SETTING)
    if "= true" in out:
        return  # the user has it off already
    _run(debugger, "settings set %s true" % _MEMCACHE_SETTING)
    _state["memcache_disabled_by_us"] = True
    if not _state["hook_installed"]:
        ok, _, _ = _run(debugger, "target stop-hook add -P %s._ReenableMemoryCache" % __name__)
        _state["hook_installed"] = ok


def _refresh_thread(debugger, thread, pc):
    """Make LLDB drop the thread's cached registers and frames (see the header)."""
    _run(debugger, "register write pc 0x%x" % pc)
    _stale_memory_cache(debugger)
    thread.GetProcess().GetThreadByID(thread.GetThreadID())


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

    # The server steps its general thread; LLDB uses thread suffixes and may never send Hg.
    _send_packet(debugger, "Hg%x" % thread.GetThreadID())
    pc0 = thread.GetFrameAtIndex(0).GetPC()
    reply = _send_packet(debugger, "stepbranch" if count == 1 else "stepbranch:%d" % count)
    stop = _parse_stop(reply)
    f = stop["fields"]
    if stop["kind"] == "":
        result.AppendMessage("stepbranch: the server does not support the stepbranch packet; "
                             "stepping through LLDB instead.")
        _client_stepbranch(debugger, count, result)
        return
    if stop["kind"] == "E":
        result.SetError("stepbranch: the server refused: %s"
                        % (reply[2:] if reply.startswith("E.") else reply))
        return
    if stop["kind"] in ("W", "X"):
        result.AppendMessage("stepbranch: the program ended (%s). LLDB has not noticed; use "
                             "`process kill`." % reply)
        return
    if stop["kind"] not in ("T", "S"):
        result.SetError("stepbranch: unexpected reply %r" % reply)
        return

    # The new PC: from the expedited registers, else ask for it.
    if "10" in f:
        pc = _le_hex_to_int(f["10"])
    else:
        raw = _send_packet(debugger, "p10;thread:%x;" % thread.GetThreadID())
        if re.fullmatch(r"[0-9a-fA-F]{16}", raw or ""):
            pc = _le_hex_to_int(raw)
        else:
            pc = None
    if pc is not None:
        _refresh_thread(debugger, thread, pc)
    else:
        result.AppendMessage("stepbranch: could not read the new PC; LLDB's registers may "
                             "be stale until the next stop.")

    if "branch-from" in f and "branch-to" in f:
        result.AppendMessage(_branch_line(target, int(f["branch-from"], 16),
                                          int(f["branch-to"], 16)))
        if stop["signal"] not in (0, 5):
            result.AppendMessage("stepbranch: then received signal %d." % stop["signal"])
    elif any(k in f for k in ("watch", "rwatch", "awatch")):
        result.AppendMessage("stepbranch: stopped by a watchpoint before a branch was taken.")
    elif "swbreak" in f or "hwbreak" in f or f.get("reason") == "breakpoint":
        result.AppendMessage("stepbranch: stopped at a breakpoint before a branch was taken.")
    elif "stepbranch-mechanism" not in f and stop["signal"] == 5:
        result.AppendMessage("stepbranch: the server did not handle the stepbranch packet (is "
                             "it branchstub?); the thread moved from 0x%x to 0x%x. Use "
                             "`stepbranch --client` with other servers." % (pc0, pc or 0))
    else:
        result.AppendMessage("stepbranch: stopped by signal %d before a branch was taken "
                             "(LLDB did not see it; it is not delivered on resume)."
                             % stop["signal"])
    _show_where(debugger, result)


def __lldb_init_module(debugger, internal_dict):
    debugger.HandleCommand(
        'command script add -f %s.stepbranch stepbranch' % __name__)
