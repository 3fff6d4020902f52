"""A GDB/MI driver for the IDE-style tests: one `gdb --interpreter=mi2` process, commands
sent one at a time with a token, output read line by line until the command's result record
(and, for commands that run the target, the next `*stopped`). This is what VS Code's cppdbg
and CLion do with GDB; nothing here is mocked."""
import os
import queue
import re
import subprocess
import threading
import time

GDB = "/usr/bin/gdb"


class MiError(AssertionError):
    pass


class MiSession:
    def __init__(self, args=(), timeout=30):
        self.timeout = timeout
        self.proc = subprocess.Popen([GDB, "--interpreter=mi2", "-nx", "-q"] + list(args),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.lines = queue.Queue()
        self.transcript = []
        self.token = 100
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in self.proc.stdout:
            self.lines.put(raw.decode("utf-8", "replace").rstrip("\n"))
        self.lines.put(None)

    def _next_line(self, deadline):
        left = deadline - time.time()
        if left <= 0:
            raise MiError("MI: timed out; transcript:\n" + self.text())
        try:
            line = self.lines.get(timeout=left)
        except queue.Empty:
            raise MiError("MI: timed out; transcript:\n" + self.text())
        if line is None:
            raise MiError("MI: gdb exited; transcript:\n" + self.text())
        self.transcript.append(line)
        return line

    def text(self):
        return "\n".join(self.transcript)

    def send(self, command, timeout=None):
        """Sends one command; returns (result line, every line read for it)."""
        self.token += 1
        tok = str(self.token)
        self.transcript.append(">>> " + tok + command)
        self.proc.stdin.write((tok + command + "\n").encode())
        self.proc.stdin.flush()
        deadline = time.time() + (timeout or self.timeout)
        seen = []
        while True:
            line = self._next_line(deadline)
            seen.append(line)
            if line.startswith(tok + "^"):
                return line, seen

    def ok(self, command, timeout=None):
        result, seen = self.send(command, timeout)
        if not re.match(r"\d+\^(done|running|connected)", result):
            raise MiError("MI: %s -> %s\n%s" % (command, result, self.text()))
        return result, seen

    def wait_stopped(self, timeout=None, seen=()):
        """The next *stopped record (possibly already among `seen`)."""
        for line in seen:
            if line.startswith("*stopped"):
                return line
        deadline = time.time() + (timeout or self.timeout)
        while True:
            line = self._next_line(deadline)
            if line.startswith("*stopped"):
                return line

    def run(self, command, timeout=None):
        """A command that resumes the target: its ^running, then the *stopped that ends it."""
        result, seen = self.ok(command, timeout)
        if "^running" not in result:
            raise MiError("MI: %s did not run: %s" % (command, result))
        return self.wait_stopped(timeout, seen)

    def console(self, command, timeout=None):
        """-interpreter-exec console: returns the console text the command printed."""
        _, seen = self.ok('-interpreter-exec console "%s"' % command.replace('"', '\\"'), timeout)
        out = []
        for line in seen:
            if line.startswith('~"'):
                out.append(bytes(line[2:-1], "utf-8").decode("unicode_escape"))
        return "".join(out)

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(b"-gdb-exit\n")
                self.proc.stdin.flush()
                self.proc.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
