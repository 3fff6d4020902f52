"""A small Debug Adapter Protocol client for the tests: it runs a DAP server (lldb-dap) with
the protocol on its stdio, as VS Code does, and speaks it.

Messages are JSON bodies each after a `Content-Length: N\\r\\n\\r\\n` header. The client sends
requests ({"type": "request", "seq", "command", "arguments"}); the adapter answers each with a
response ({"type": "response", "request_seq", "success", "message", "body"}) and sends
events ({"type": "event", "event", "body"}: initialized, stopped, continued, output, ...) at
any time. A reader thread collects them; every wait has a deadline and, on failure, says
what was received (the transcript). Reverse requests from the adapter (runInTerminal) are
answered as unsupported.
"""
import json
import os
import signal
import subprocess
import threading
import time


class DapError(AssertionError):
    """A request failed, or what was waited for did not come."""


def encode(message):
    """One framed DAP message (header and JSON body) as bytes."""
    body = json.dumps(message, separators=(",", ":")).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class Decoder:
    """Splits a byte stream into DAP messages (feed bytes, take the complete ones)."""

    def __init__(self):
        self._buf = b""

    def feed(self, data):
        self._buf += data
        out = []
        while True:
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                break
            length = None
            for line in self._buf[:end].split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            if length is None:
                raise DapError("DAP header without Content-Length: %r" % self._buf[:end])
            if len(self._buf) < end + 4 + length:
                break
            body = self._buf[end + 4:end + 4 + length]
            self._buf = self._buf[end + 4 + length:]
            out.append(json.loads(body.decode("utf-8")))
        return out


class DapSession:
    """One adapter process (argv, e.g. [lldb-dap]) and the messages it sent."""

    def __init__(self, argv, timeout=30, env=None):
        self.timeout = timeout
        self.argv = list(argv)
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True, env=env)
        self._seq = 0
        self._cv = threading.Condition()
        self._messages = []          # everything received, in order
        self._responses = {}         # request_seq -> response
        self._taken = set()          # indexes of events already returned by wait_event
        self._eof = False
        self._sent = []
        self.stderr = b""
        self._threads = [threading.Thread(target=self._read, daemon=True),
                         threading.Thread(target=self._read_stderr, daemon=True)]
        for t in self._threads:
            t.start()

    # -------------------------------------------------------------- transport

    def _read(self):
        dec = Decoder()
        fd = self.proc.stdout.fileno()
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:
                data = b""
            with self._cv:
                if not data:
                    self._eof = True
                    self._cv.notify_all()
                    return
                for msg in dec.feed(data):
                    self._messages.append(msg)
                    if msg.get("type") == "response":
                        self._responses[msg.get("request_seq")] = msg
                    elif msg.get("type") == "request":
                        self._answer_reverse(msg)
                self._cv.notify_all()

    def _read_stderr(self):
        for chunk in iter(lambda: self.proc.stderr.read1(65536), b""):
            self.stderr += chunk

    def _write(self, msg):
        self._sent.append(msg)
        try:
            self.proc.stdin.write(encode(msg))
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError) as e:
            raise DapError("cannot send %s: %s\n%s" % (msg.get("command"), e, self.transcript()))

    def _answer_reverse(self, req):
        self._seq += 1
        self._write({"type": "response", "seq": self._seq, "request_seq": req.get("seq"),
                     "command": req.get("command"), "success": False,
                     "message": "not supported by the test client"})

    def transcript(self, last=40):
        """The last messages exchanged, for failure messages."""
        lines = ["<- " + json.dumps(m)[:400] for m in self._messages[-last:]]
        sent = ["-> " + json.dumps(m)[:400] for m in self._sent[-10:]]
        err = self.stderr.decode("utf-8", "replace")[-2000:]
        return "sent (last 10):\n%s\nreceived (last %d):\n%s\nstderr:\n%s" % (
            "\n".join(sent), last, "\n".join(lines), err)

    # -------------------------------------------------------------- requests

    def send(self, command, arguments=None):
        """Sends a request; returns its seq (for response())."""
        with self._cv:
            self._seq += 1
            seq = self._seq
            msg = {"type": "request", "seq": seq, "command": command}
            if arguments is not None:
                msg["arguments"] = arguments
            self._write(msg)
        return seq

    def response(self, seq, timeout=None, check=True):
        """The response to request `seq`; with check, a failed one raises DapError."""
        deadline = time.monotonic() + (timeout or self.timeout)
        with self._cv:
            while seq not in self._responses:
                left = deadline - time.monotonic()
                if left <= 0 or self._eof:
                    raise DapError("no response to request %d (%s)\n%s" % (
                        seq, "adapter exited" if self._eof else "timed out", self.transcript()))
                self._cv.wait(left)
            resp = self._responses[seq]
        if check and not resp.get("success"):
            raise DapError("request %s failed: %s\n%s" % (
                resp.get("command"), resp.get("message"), self.transcript()))
        return resp

    def request(self, command, arguments=None, timeout=None, check=True):
        """Sends a request and waits for its response; returns the response's body ({} when
        it has none), or the whole response with check=False."""
        resp = self.response(self.send(command, arguments), timeout, check)
        return (resp.get("body") or {}) if check else resp

    # -------------------------------------------------------------- events

    def wait_event(self, event, pred=None, timeout=None):
        """The first event named `event` (and for which pred(body) holds) not returned
        before; waits for it."""
        deadline = time.monotonic() + (timeout or self.timeout)
        with self._cv:
            while True:
                for i, m in enumerate(self._messages):
                    if (i not in self._taken and m.get("type") == "event" and m.get("event") == event
                            and (pred is None or pred(m.get("body") or {}))):
                        self._taken.add(i)
                        return m.get("body") or {}
                left = deadline - time.monotonic()
                if left <= 0 or self._eof:
                    raise DapError("no %r event (%s)\n%s" % (
                        event, "adapter exited" if self._eof else "timed out", self.transcript()))
                self._cv.wait(left)

    def events(self, event):
        """Every event named `event` received so far (bodies)."""
        with self._cv:
            return [m.get("body") or {} for m in self._messages
                    if m.get("type") == "event" and m.get("event") == event]

    def output(self):
        """The text of every output event so far."""
        return "".join(b.get("output", "") for b in self.events("output"))

    # -------------------------------------------------------------- lifetime

    def wait_exit(self, timeout=10):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def close(self):
        """Ends the adapter: stdin closed, then SIGTERM, then SIGKILL to its process group."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            if self.wait_exit(3) is None:
                for sig in (signal.SIGTERM, signal.SIGKILL):
                    try:
                        os.killpg(self.proc.pid, sig)
                    except OSError:
                        pass
                    if self.wait_exit(3) is not None:
                        break
        for t in self._threads:      # they end at EOF; never close a pipe under a reader
            t.join(3)
        for f in (self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except OSError:
                pass
