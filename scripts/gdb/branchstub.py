# branchstub GDB commands: stepbranch [N] and reverse-stepbranch [N].
#
# Load it with
#     (gdb) source /path/to/branchstub/scripts/gdb/branchstub.py
# or put that line in ~/.gdbinit. See docs/stepbranch.md.
#
#   stepbranch [N]          run the selected thread until it has taken N branches
#                           (default 1). GDB performs and reports the resume itself: the
#                           script asks branchstub (Qbranchstub:stepbranch-next) to turn
#                           GDB's next single step of the thread into that run, then does
#                           `stepi`, so GDB, MI (*stopped) and IDEs see a normal stop
#                           (`stepi &` with mi-async on: -exec-interrupt is read during
#                           the run). A breakpoint at the pc, which GDB lifts for its
#                           step, is named in the request and stays in for the run.
#                           Other threads stay stopped. While replaying a btrace
#                           recording, moves forward through the recorded history
#                           (`stepi K`) instead.
#   stepbranch --each [N]   one step per branch, printing every branch.
#   stepbranch --client [N] do it in GDB with stepi (any server; slow).
#   reverse-stepbranch [N]  with `record btrace` active: go back to the previous
#                           taken branch (N times), with `reverse-stepi K`.
#
# Output: GDB's own stop report (as after `stepi`), then one line per reported branch,
#     branch 0x401136 -> 0x401020 <foo+0>
# and, when something else ended the step, why (breakpoint, signal, exit).
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


def _breakpoint_at_pc():
    """The selected thread's pc when an enabled breakpoint location of GDB's is there (GDB
    lifts it to step over it), else None. Needs gdb.Breakpoint.locations (GDB 13)."""
    try:
        pc = gdb.newest_frame().pc()
    except gdb.error:
        return None
    code = (gdb.BP_BREAKPOINT, gdb.BP_HARDWARE_BREAKPOINT)
    for b in gdb.breakpoints():
        if not b.enabled or b.pending or b.type not in code:
            continue
        for loc in getattr(b, "locations", ()):
            if loc.enabled and loc.address == pc:
                return pc
    return None


class _Stepper:
    """stepbranch as a resume GDB performs itself: the server is asked (one packet) to turn
    GDB's next single step of the selected thread into a run to its N-th next taken branch,
    then GDB does `stepi`. GDB (and MI: `*stopped`, and every front end) sees a normal stop."""

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
        self.inferior = inf
        self.thread = th

    def _send(self, packet):
        reply = self.conn.send_packet(packet)
        if isinstance(reply, (bytes, bytearray)):
            reply = reply.decode("latin-1")
        return reply

    def arm(self, count):
        """Ask for it. '' when the server does not know the request (not branchstub)."""
        packet = "Qbranchstub:stepbranch-next:p%x.%x,%d" % (self.inferior.pid, self.thread.ptid[1], count)
        lifted = _breakpoint_at_pc() if count > 1 else None
        if lifted is not None:
            # GDB takes it out for the step (its step-over): the server keeps it in for the rest
            # of the run, so a loop back to it still stops there.
            packet += ";bp:%x" % lifted
        reply = self._send(packet)
        if reply.startswith("E"):
            raise gdb.GdbError("stepbranch: the server refused: %s"
                               % (reply[2:] if reply.startswith("E.") else reply))
        return reply

    def last(self):
        """The server's account of the stepbranch the last stop ended: a StopReply-like
        field dict, or None when the last stop did not end one."""
        reply = self._send("qbranchstub:stepbranch-last")
        if not reply or reply == "none" or reply.startswith("E"):
            return None
        return StopReply("T05" + reply)

    def step(self):
        """GDB's own stepi. Returns the stop event GDB reported (None if none came)."""
        events = []

        def on_stop(ev):
            events.append(ev)

        def on_exit(ev):
            events.append(ev)

        gdb.events.stop.connect(on_stop)
        gdb.events.exited.connect(on_exit)
        try:
            gdb.execute("stepi", from_tty=False)
        finally:
            gdb.events.stop.disconnect(on_stop)
            gdb.events.exited.disconnect(on_exit)
        return events[-1] if events else None

    def step_in_background(self, done):
        """GDB's `stepi &`: the command returns at once and GDB goes on reading commands (an
        MI front end's -exec-interrupt, its pause button, is read while the run lasts);
        done(event) is called at the stop. False when GDB refused to run it in the background."""
        state = {"done": False}

        def finish(ev):
            if state["done"]:
                return
            state["done"] = True
            gdb.events.stop.disconnect(finish)
            gdb.events.exited.disconnect(finish)
            done(ev)

        gdb.events.stop.connect(finish)
        gdb.events.exited.connect(finish)
        try:
            gdb.execute("stepi &", from_tty=False)
        except gdb.error:
            state["done"] = True
            gdb.events.stop.disconnect(finish)
            gdb.events.exited.disconnect(finish)
            return False
        return True


def _async_ui():
    """GDB runs commands in the background here (MI with mi-async on, as VS Code's cppdbg and
    CLion set it): a synchronous `stepi` would keep GDB from reading -exec-interrupt until the
    whole run is over."""
    try:
        return bool(gdb.parameter("mi-async"))
    except (gdb.error, RuntimeError):
        return False


def _report_step(stepper, ev):
    """After the converted step's stop: prints the branch, or why the run ended early. True
    when the run took its branches and nothing else stopped it."""
    if isinstance(ev, gdb.ExitedEvent) or not gdb.selected_inferior().pid:
        _explain_stop(ev)
        return False
    last = stepper.last()
    br = last.branch if last is not None else None
    if br is None:
        _explain_stop(ev)
        return False
    gdb.write(_branch_line(*br) + "\n")
    if isinstance(ev, gdb.BreakpointEvent) or (
            isinstance(ev, gdb.SignalEvent) and ev.stop_signal != "SIGTRAP"):
        _explain_stop(ev)  # the branch led onto a breakpoint, or a signal came with it
        return False
    return True


def _explain_stop(ev):
    """The stop ended the stepbranch early (GDB has printed it its own way): say so in the
    command's output too. Returns False when the program is gone."""
    if isinstance(ev, gdb.ExitedEvent):
        code = getattr(ev, "exit_code", None)
        gdb.write("stepbranch: the program exited%s.\n"
                  % ("" if code is None else " with code %d" % code))
        return False
    if isinstance(ev, gdb.BreakpointEvent):
        nums = [b.number for b in ev.breakpoints if b.number > 0]
        kinds = {b.type for b in ev.breakpoints}
        watch = {gdb.BP_WATCHPOINT, gdb.BP_HARDWARE_WATCHPOINT, gdb.BP_READ_WATCHPOINT,
                 gdb.BP_ACCESS_WATCHPOINT}
        what = "watchpoint" if kinds & watch else "breakpoint"
        gdb.write("stepbranch: stopped at %s %s.\n" % (what, ", ".join(str(n) for n in nums)))
    elif isinstance(ev, gdb.SignalEvent) and ev.stop_signal != "SIGTRAP":
        gdb.write("stepbranch: program received signal %s.\n" % ev.stop_signal)
    else:
        gdb.write("stepbranch: stopped without taking a branch.\n")
    return True


def _replay_forward(rec, count):
    """stepbranch while replaying: move forward through the recorded history with GDB's own
    `stepi K` (a normal stop for GDB, MI and front ends), K counted in the history."""
    hist = rec.instruction_history
    n = len(hist)
    idx = _history_index(rec, hist, rec.replay_position)
    lines = []
    target = None
    j = idx
    while count > 0 and j < n:
        insn = hist[j]
        if not hasattr(insn, "pc"):  # a gap in the trace
            gdb.write("stepbranch: gap in the recorded history at %d\n" % insn.number)
            break
        next_pc = hist[j + 1].pc if j + 1 < n else rec.end.pc
        if _taken(insn, next_pc):
            lines.append(_branch_line(insn.pc, next_pc))
            count -= 1
            target = j + 1
        j += 1
    for line in lines:
        gdb.write(line + "\n")
    if target is None:
        if j < n:  # stopped at a gap: stay
            return
        gdb.write("stepbranch: no further taken branch in the recorded history.\n")
        target = n
    # Stepping onto index n leaves the history: GDB reports "No more reverse-execution
    # history" and is back at the live program, where the last branch led.
    gdb.execute("stepi %d" % (target - idx), from_tty=False)


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


class StepBranch(gdb.Command):
    """Run the selected thread until it has taken a branch (branchstub extension).

Usage: stepbranch [--each|--client] [N]

Resumes only the selected thread until it has taken N branches (default 1): a jmp, a
taken conditional jump, call, ret, an indirect jmp/call, a taken loop/jrcxz. It stops
earlier at a breakpoint, a watchpoint, a signal or Ctrl-C. GDB performs the resume (a
`stepi` that branchstub runs to the N-th branch), so it reports the stop as after any
step; then the branch is printed as
    branch 0xFROM -> 0xTO <function+offset>

--each    one step per branch, printing every branch (N stops).
--client  single-step from GDB instead (works with any server, much slower).

While replaying a `record btrace` recording, it moves forward through the history
(`stepi K`). If the server does not know the request, the --client method is used; in
non-stop mode too (branchstub's stepbranch needs all-stop), with a note saying so."""

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
        if gdb.parameter("non-stop"):
            # branchstub runs a stepbranch with the whole process stopped and answers it with
            # a stop reply, neither of which non-stop has: it refuses the request there.
            gdb.write("stepbranch: non-stop mode: branchstub's stepbranch needs all-stop mode "
                      "(`set non-stop off` before connecting); single-stepping the selected "
                      "thread from GDB instead, the other threads run on.\n")
            _client_stepbranch(count)
            return
        stepper = _Stepper()
        counts = [1] * count if "each" in flags else [count]
        for i, n in enumerate(counts):
            if not stepper.arm(n):
                if i == 0:
                    gdb.write("stepbranch: the server does not offer stepbranch (it does not know "
                              "Qbranchstub:stepbranch-next); single-stepping from GDB instead.\n")
                    _client_stepbranch(count)
                return
            # Typed (or sent by the front end) only: inside a user-defined command or breakpoint
            # commands, the next command expects the stop to have happened.
            if len(counts) == 1 and from_tty and _async_ui() and \
                    stepper.step_in_background(lambda ev: _report_step(stepper, ev)):
                return
            if not _report_step(stepper, stepper.step()):
                return


class ReverseStepBranch(gdb.Command):
    """Go back to the previous taken branch in a btrace recording (branchstub).

Usage: reverse-stepbranch [N]

Needs `record btrace`. Moves the replay position back to the branch instruction of the
most recent taken branch (N times), printing each as
    branch 0xFROM -> 0xTO <function+offset>
It moves with `reverse-stepi K`, so GDB reports the stop as after any reverse step.
Use `stepbranch` while replaying (or `record goto end`) to move forward again."""

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
        # GDB's own reverse step (a normal stop for GDB, MI and front ends), not `record goto`.
        gdb.execute("reverse-stepi %d" % (idx - target), from_tty=False)


StepBranch()
ReverseStepBranch()
