# branchstub GDB commands: stepbranch [N] and reverse-stepbranch [N].
#
# Load it with
#     (gdb) source /path/to/branchstub/scripts/gdb/branchstub.py
# or put that line in ~/.gdbinit. See docs/stepbranch.md.
#
#   stepbranch [N]          run the selected thread until it has taken N branches
#                           (default 1), through branchstub's `stepbranch[:N]` packet.
#                           Other threads stay stopped. While replaying a btrace
#                           recording, moves forward through the recorded history
#                           instead.
#   stepbranch --each [N]   one packet per branch, printing every branch.
#   stepbranch --client [N] do it in GDB with stepi (any server; slow).
#   reverse-stepbranch [N]  with `record btrace` active: go back to the previous
#                           taken branch (N times), using GDB's record API.
#
# Output: one line per reported branch,
#     branch 0x401136 -> 0x401020 <foo+0>
# then the new frame and instruction, as GDB shows them after a step.
#
# Works with GDB 13 or later (gdb.RemoteTargetConnection.send_packet).

import re

import gdb

# GDB's own signal numbering (include/gdb/signals.def), used in stop replies.
_GDB_SIGNALS = {
    1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT",
    7: "SIGEMT", 8: "SIGFPE", 9: "SIGKILL", 10: "SIGBUS", 11: "SIGSEGV", 12: "SIGSYS",
    13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM", 16: "SIGURG", 17: "SIGSTOP",
    18: "SIGTSTP", 19: "SIGCONT", 20: "SIGCHLD", 21: "SIGTTIN", 22: "SIGTTOU",
    23: "SIGIO", 24: "SIGXCPU", 25: "SIGXFSZ", 26: "SIGVTALRM", 27: "SIGPROF",
    28: "SIGWINCH", 29: "SIGLOST", 30: "SIGUSR1", 31: "SIGUSR2", 32: "SIGPWR",
    33: "SIGPOLL", 143: "SIG0",
}


class StopReply:
    """A parsed stop reply (T, S, W, X) or error/empty reply."""

    def __init__(self, text):
        self.text = text
        self.kind = text[:1] if text else ""
        self.signal = None
        self.fields = {}
        self.exit_code = None
        if self.kind in ("T", "S") and len(text) >= 3:
            self.signal = int(text[1:3], 16)
            for item in text[3:].split(";"):
                if not item:
                    continue
                key, sep, value = item.partition(":")
                self.fields[key] = value if sep else ""
        elif self.kind in ("W", "X") and len(text) >= 3:
            self.exit_code = int(text[1:3], 16)

    @property
    def is_stop(self):
        return self.kind in ("T", "S")

    @property
    def branch(self):
        f = self.fields
        if "branch-from" in f and "branch-to" in f:
            return int(f["branch-from"], 16), int(f["branch-to"], 16)
        return None

    @property
    def mechanism(self):
        return self.fields.get("stepbranch-mechanism")

    def looks_like_plain_step(self):
        """A T05 with none of the fields a branchstub stepbranch reply carries."""
        if self.kind not in ("T", "S") or self.signal != 5:
            return False
        known = ("branch-from", "branch-to", "stepbranch-mechanism", "swbreak", "hwbreak",
                 "watch", "rwatch", "awatch", "reason")
        return not any(k in self.fields for k in known)

    def signal_name(self):
        return _GDB_SIGNALS.get(self.signal, "signal %d" % self.signal)


def _symbolize(addr):
    """'<function+off>' for addr, or '' when GDB knows no symbol there."""
    try:
        out = gdb.execute("info symbol 0x%x" % addr, to_string=True).strip()
    except gdb.error:
        return ""
    m = re.match(r"^(\S+)(?: \+ (\d+))? in section", out)
    if not m:
        return ""
    return "<%s+%d>" % (m.group(1), int(m.group(2) or 0))


def _branch_line(frm, to):
    sym = _symbolize(to)
    return "branch 0x%x -> 0x%x%s" % (frm, to, (" " + sym) if sym else "")


def _pc():
    return int(gdb.parse_and_eval("$pc")) & 0xFFFFFFFFFFFFFFFF


def _show_where():
    """Show the new place the way GDB does after a step: the frame, then the instruction."""
    try:
        gdb.write(gdb.execute("frame", to_string=True))
        gdb.write(gdb.execute("x/i $pc", to_string=True))
    except gdb.error as e:
        gdb.write("(cannot show the frame: %s)\n" % e)


def _parse_count(arg, cmd):
    flags = set()
    count = 1
    for word in gdb.string_to_argv(arg):
        if word.startswith("--"):
            flags.add(word[2:])
            continue
        try:
            count = int(gdb.parse_and_eval(word))
        except (gdb.error, ValueError):
            raise gdb.GdbError("usage: %s [--each|--client] [N]" % cmd)
    if count < 1:
        raise gdb.GdbError("%s: N must be at least 1" % cmd)
    return count, flags


def _btrace_recording():
    try:
        rec = gdb.current_recording()
    except gdb.error:
        return None
    return rec


def _history_index(rec, hist, insn):
    """Index into hist (a btrace instruction list) of a recorded instruction."""
    return insn.number - hist[0].number


def _taken(insn, next_pc):
    return insn.pc + insn.size != next_pc


class _Remote:
    """Helpers for talking to branchstub behind GDB's back, then making GDB consistent."""

    def __init__(self):
        inf = gdb.selected_inferior()
        conn = inf.connection
        if conn is None or not hasattr(conn, "send_packet"):
            raise gdb.GdbError(
                "stepbranch: not connected to a remote target "
                "(use `target remote` to branchstub first)")
        if inf.pid == 0:
            raise gdb.GdbError("stepbranch: the program is not being run.")
        th = gdb.selected_thread()
        if th is None:
            raise gdb.GdbError("stepbranch: no thread selected.")
        if th.is_running():
            raise gdb.GdbError("stepbranch: the selected thread is running.")
        self.conn = conn
        self.thread = th

    def _sync_general_thread(self):
        # The server steps its general (Hg) thread. GDB sends Hg lazily, so make GDB fetch
        # the selected thread's registers: after a register-cache flush that read goes to
        # the server and GDB first points Hg at the selected thread.
        gdb.execute("maint flush register-cache", to_string=True)
        _pc()

    def _insert_breakpoints(self):
        # In all-stop mode GDB removes its breakpoints and watchpoints from the target
        # whenever the program stops. A step that should stop at a breakpoint needs them
        # in place: with `breakpoint always-inserted on`, any change to the breakpoint
        # list makes GDB insert every location, so add and delete an internal breakpoint.
        old = gdb.parameter("breakpoint always-inserted")
        gdb.execute("set breakpoint always-inserted on", to_string=True)
        try:
            if any(b.enabled for b in gdb.breakpoints()):
                b = gdb.Breakpoint("*0x%x" % _pc(), internal=True)
                b.delete()
        finally:
            gdb.execute("set breakpoint always-inserted %s" % ("on" if old else "off"),
                        to_string=True)

    def send(self, packet):
        self._sync_general_thread()
        self._insert_breakpoints()
        # A step may take longer than GDB's remote timeout (2 s) when the program sits
        # in a system call; GDB would give up on the reply and the protocol would go
        # out of step. Wait as long as the user allows.
        old_timeout = gdb.parameter("remotetimeout")
        limit = max(int(old_timeout or 2), int(gdb.parameter("stepbranch-timeout")))
        gdb.execute("set remotetimeout %d" % limit, to_string=True)
        try:
            reply = self.conn.send_packet(packet)
        finally:
            gdb.execute("set remotetimeout %d" % int(old_timeout or 2), to_string=True)
            # GDB did not see the resume: its register, frame and memory caches are stale.
            gdb.execute("maint flush register-cache", to_string=True)
            gdb.execute("maint flush dcache", to_string=True)
        if isinstance(reply, (bytes, bytearray)):
            reply = reply.decode("latin-1")
        return StopReply(reply)


def _server_has_stepbranch():
    """Asks without side effects: other servers may take the raw packet for a step (gdbserver
    reads `stepbranch` as `s` with a garbage address), so look at `monitor help` first."""
    try:
        text = gdb.execute("monitor help", to_string=True)
    except gdb.error:
        return False
    return "stepbranch" in text


def _report_non_branch_stop(reply):
    """Explain a stop that is not 'took a branch'. Returns True if the program still lives."""
    if reply.kind in ("W", "X"):
        what = ("exited with code %d" % reply.exit_code if reply.kind == "W"
                else "was killed by %s" % _GDB_SIGNALS.get(reply.exit_code, str(reply.exit_code)))
        gdb.write("stepbranch: the program %s. GDB has not noticed; use `kill` or "
                  "`disconnect`.\n" % what)
        return False
    f = reply.fields
    name = reply.signal_name()
    if "watch" in f or "rwatch" in f or "awatch" in f:
        kind = "watch" if "watch" in f else ("rwatch" if "rwatch" in f else "awatch")
        addr = f[kind]
        gdb.write("stepbranch: stopped by a watchpoint (%s 0x%s) before a branch was taken.\n"
                  % (kind, addr))
    elif "swbreak" in f or "hwbreak" in f or f.get("reason") == "breakpoint" or (
            reply.signal == 5 and _breakpoint_numbers_at(_pc())):
        nums = _breakpoint_numbers_at(_pc())
        which = ("breakpoint %s" % ", ".join(str(n) for n in nums)) if nums else "a breakpoint"
        gdb.write("stepbranch: stopped at %s before a branch was taken.\n" % which)
    elif reply.signal == 5:
        gdb.write("stepbranch: stopped (SIGTRAP) without taking a branch.\n")
    else:
        gdb.write("stepbranch: program received signal %s.\n" % name)
        _queue_signal_like_gdb(name)
    return True


def _breakpoint_numbers_at(pc):
    nums = []
    for b in gdb.breakpoints():
        if not b.enabled or b.type not in (gdb.BP_BREAKPOINT, getattr(gdb, "BP_HARDWARE_BREAKPOINT", -1)):
            continue
        for loc in getattr(b, "locations", []) or []:
            if loc.address == pc:
                nums.append(b.number)
                break
        else:
            if not hasattr(b, "locations") and b.location:
                try:
                    if int(gdb.parse_and_eval("(long)(%s)" % b.location.lstrip("*"))) == pc:
                        nums.append(b.number)
                except gdb.error:
                    pass
    return nums


def _queue_signal_like_gdb(name):
    # GDB did not see this stop, so it would resume without the signal. Queue it for the
    # next resume exactly when `handle` says to pass it, as GDB itself would.
    if name.startswith("signal "):
        return
    try:
        table = gdb.execute("info signals %s" % name, to_string=True).splitlines()
    except gdb.error:
        return
    for line in table:
        parts = line.split()
        if parts and parts[0] == name and len(parts) >= 4:
            if parts[3] == "Yes":
                gdb.execute("queue-signal %s" % name, to_string=True)
                gdb.write("stepbranch: %s will be delivered when the program resumes "
                          "(`queue-signal 0` discards it).\n" % name)
            return


def _replay_forward(rec, count):
    """stepbranch while replaying: move forward through the recorded history."""
    hist = rec.instruction_history
    n = len(hist)
    idx = _history_index(rec, hist, rec.replay_position)
    lines = []
    target = None
    while count > 0 and idx < n:
        insn = hist[idx]
        if not hasattr(insn, "pc"):  # a gap in the trace
            gdb.write("stepbranch: gap in the recorded history at %d\n" % insn.number)
            break
        next_pc = hist[idx + 1].pc if idx + 1 < n else rec.end.pc
        if _taken(insn, next_pc):
            lines.append(_branch_line(insn.pc, next_pc))
            count -= 1
            target = idx + 1
        idx += 1
    for line in lines:
        gdb.write(line + "\n")
    if target is None:
        gdb.write("stepbranch: no further taken branch in the recorded history.\n")
        gdb.execute("record goto end", to_string=True)
    elif target >= n:
        gdb.execute("record goto end", to_string=True)
    else:
        gdb.execute("record goto %d" % hist[target].number, to_string=True)
    _show_where()


def _client_stepbranch(count):
    """Any server: single-step in GDB until the PC leaves the straight line."""
    arch = gdb.selected_frame().architecture()
    last_stop = []

    def on_stop(ev):
        last_stop.append(ev)

    gdb.events.stop.connect(on_stop)
    # Keep GDB from printing the frame after every stepi; we show it once at the end.
    quiet_old = gdb.parameter("suppress-cli-notifications")
    gdb.execute("set suppress-cli-notifications on", to_string=True)
    try:
        while count > 0:
            pc = _pc()
            length = arch.disassemble(pc)[0]["length"]
            del last_stop[:]
            gdb.execute("stepi", to_string=True)
            if not gdb.selected_inferior().pid:
                gdb.write("stepbranch: the program is no longer running.\n")
                return
            new = _pc()
            ev = last_stop[-1] if last_stop else None
            if new != pc + length:
                gdb.write(_branch_line(pc, new) + "\n")
                count -= 1
            if isinstance(ev, gdb.BreakpointEvent):
                gdb.write("stepbranch: stopped at breakpoint %s.\n"
                          % ", ".join(str(b.number) for b in ev.breakpoints))
                break
            if isinstance(ev, gdb.SignalEvent) and ev.stop_signal != "SIGTRAP":
                gdb.write("stepbranch: program received signal %s.\n" % ev.stop_signal)
                break
    finally:
        gdb.events.stop.disconnect(on_stop)
        gdb.execute("set suppress-cli-notifications %s" % ("on" if quiet_old else "off"),
                    to_string=True)
    _show_where()


class StepBranchTimeout(gdb.Parameter):
    """How many seconds GDB waits for the reply to a stepbranch packet."""

    set_doc = "Set how long GDB waits for the reply to a stepbranch packet."
    show_doc = "Show how long GDB waits for the reply to a stepbranch packet."

    def __init__(self):
        super().__init__("stepbranch-timeout", gdb.COMMAND_RUNNING, gdb.PARAM_ZUINTEGER)
        self.value = 600

    def get_show_string(self, svalue):
        return "GDB waits up to %s seconds for a stepbranch reply." % svalue


class StepBranch(gdb.Command):
    """Run the selected thread until it has taken a branch (branchstub extension).

Usage: stepbranch [--each|--client] [N]

Resumes only the selected thread until it has taken N branches (default 1): a jmp, a
taken conditional jump, call, ret, an indirect jmp/call, a taken loop/jrcxz. It stops
earlier at a breakpoint, a watchpoint, or a signal. Prints each reported branch as
    branch 0xFROM -> 0xTO <function+offset>
then the new frame. Uses branchstub's `stepbranch` / `stepbranch:N` packet.

--each    send one packet per branch, printing every branch (N round trips).
--client  single-step from GDB instead (works with any server, much slower).

While replaying a `record btrace` recording, it moves forward through the history.
If the server does not know the packet, the --client method is used."""

    def __init__(self):
        super().__init__("stepbranch", gdb.COMMAND_RUNNING)

    def invoke(self, arg, from_tty):
        count, flags = _parse_count(arg, "stepbranch")
        rec = _btrace_recording()
        if rec is not None and rec.method == "full":
            raise gdb.GdbError("stepbranch: not available while `record full` is active "
                               "(it would bypass GDB's recording); use `record stop` first.")
        if rec is not None and rec.replay_position is not None:
            _replay_forward(rec, count)
            return
        if "client" in flags:
            _client_stepbranch(count)
            return
        if not _server_has_stepbranch():
            gdb.write("stepbranch: the server does not offer stepbranch (`monitor help` does not "
                      "list it); single-stepping from GDB instead.\n")
            _client_stepbranch(count)
            return
        remote = _Remote()
        if "each" in flags:
            packets = ["stepbranch"] * count
        else:
            packets = ["stepbranch" if count == 1 else "stepbranch:%d" % count]
        remaining = count
        for packet in packets:
            pc0 = _pc()
            reply = remote.send(packet)
            if reply.kind == "":
                gdb.write("stepbranch: the server does not support the stepbranch packet; "
                          "single-stepping from GDB instead.\n")
                _client_stepbranch(remaining)
                return
            if reply.looks_like_plain_step():
                # Not branchstub: gdbserver, for one, takes `stepbranch` for an `s` packet
                # with a garbage address and resumes the thread in its own way.
                gdb.write("stepbranch: the server did not handle the stepbranch packet "
                          "(is it branchstub?); the thread moved from 0x%x to 0x%x. Use "
                          "`stepbranch --client` with other servers.\n" % (pc0, _pc()))
                _show_where()
                return
            if reply.kind == "E":
                msg = reply.text[2:] if reply.text.startswith("E.") else reply.text
                raise gdb.GdbError("stepbranch: the server refused: %s" % msg)
            if not reply.is_stop:
                if not _report_non_branch_stop(reply):
                    return
                raise gdb.GdbError("stepbranch: unexpected reply %r" % reply.text)
            br = reply.branch
            if br is None:
                _report_non_branch_stop(reply)
                break
            gdb.write(_branch_line(*br) + "\n")
            remaining -= 1 if "each" in flags else count
            if reply.signal not in (0, 5):
                _report_non_branch_stop(reply)
                break
        _show_where()


class ReverseStepBranch(gdb.Command):
    """Go back to the previous taken branch in a btrace recording (branchstub).

Usage: reverse-stepbranch [N]

Needs `record btrace`. Moves the replay position back to the branch instruction of the
most recent taken branch (N times), printing each as
    branch 0xFROM -> 0xTO <function+offset>
Use `record goto end` (or `stepbranch` while replaying) to move forward again."""

    def __init__(self):
        super().__init__("reverse-stepbranch", gdb.COMMAND_RUNNING)

    def invoke(self, arg, from_tty):
        count, _ = _parse_count(arg, "reverse-stepbranch")
        rec = _btrace_recording()
        if rec is None or rec.method != "btrace":
            raise gdb.GdbError("reverse-stepbranch: needs `record btrace` (no btrace recording "
                               "is active).")
        hist = rec.instruction_history
        n = len(hist)
        if n == 0:
            raise gdb.GdbError("reverse-stepbranch: the recorded history is empty.")
        pos = rec.replay_position
        if pos is None:
            idx = n  # the live position: one past the last recorded instruction
            cur_pc = rec.end.pc
        else:
            idx = _history_index(rec, hist, pos)
            cur_pc = pos.pc
        target = None
        j = idx - 1
        next_pc = cur_pc
        while count > 0 and j >= 0:
            insn = hist[j]
            if not hasattr(insn, "pc"):  # a gap: history before it is not contiguous
                gdb.write("reverse-stepbranch: gap in the recorded history at %d\n"
                          % insn.number)
                break
            if _taken(insn, next_pc):
                gdb.write(_branch_line(insn.pc, next_pc) + "\n")
                target = j
                count -= 1
            next_pc = insn.pc
            j -= 1
        if target is None:
            gdb.write("reverse-stepbranch: no earlier taken branch in the recorded history.\n")
            return
        gdb.execute("record goto %d" % hist[target].number, to_string=True)
        _show_where()


StepBranchTimeout()
StepBranch()
ReverseStepBranch()
