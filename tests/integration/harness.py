"""Helpers for the integration tests: the server under test, real gdb / lldb-16 / lldb-19
batch sessions, the inferiors, and a tiny raw RSP client.

Environment:
  BRANCHSTUB_BUILD   build directory (default /work/main/build); inferiors in <build>/inferiors
  BRANCHSTUB_SERVER  server binary (default <build>/server/branchstub); /usr/bin/gdbserver works
                     for every test not marked branchstub_only.
  BRANCHSTUB_TEST_SERVER  the test build of the server (default <build>/tests/branchstub-testfeeds):
                     branchstub plus the TEST ONLY --test-* options (tests/support), which the
                     shipped binary does not have; Server() runs it for a test that passes one.
  BRANCHSTUB_LLDB    the LLDB of the LLDB tests (default lldb-16); BRANCHSTUB_LLDB19 and
                     BRANCHSTUB_LLDB_DAP: LLDB 19 and lldb-dap-19 (default: installed, else where
                     scripts/lldb-beside.sh 19 unpacked them); their tests skip when they are absent.
  BRANCHSTUB_SERVER_ARGS  options put first on every server command line (space-separated),
                     e.g. "--btrace-source=patch" to run the btrace tests on that source; one
                     a test gives itself (same --name) wins.
  BRANCHSTUB_TEST_TIMEOUT_SCALE  multiplies every deadline of this harness (clients, waits,
                     replies); for slow machines, e.g. 10 in a TCG guest (tests/vendor-vm/run.sh).

No sleeps are used as synchronisation: every wait reads a pipe or polls a condition with a
deadline.
"""
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("BRANCHSTUB_BUILD", os.path.join(REPO, "build"))
SERVER = os.environ.get("BRANCHSTUB_SERVER", os.path.join(BUILD, "server", "branchstub"))
IS_GDBSERVER = "gdbserver" in os.path.basename(SERVER)
TEST_SERVER = os.environ.get("BRANCHSTUB_TEST_SERVER", os.path.join(BUILD, "tests", "branchstub-testfeeds"))
GDBSERVER = shutil.which("gdbserver") or "/usr/bin/gdbserver"
GDB = shutil.which("gdb") or "/usr/bin/gdb"
LLDB = os.environ.get("BRANCHSTUB_LLDB") or shutil.which("lldb-16") or "/usr/bin/lldb-16"


def lldb_beside(tool, version):
    """An LLDB tool of another version (tool-VERSION, e.g. lldb-dap-19): installed, else
    unpacked beside lldb-16 by scripts/lldb-beside.sh (in $LLDB<V>_PREFIX, /opt/lldb<V> or
    ~/.cache/branchstub/lldb<V>); None when there is none."""
    name = "%s-%s" % (tool, version)
    prefixes = [os.environ.get("LLDB%s_PREFIX" % version), "/opt/lldb%s" % version,
                os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                             "branchstub", "lldb%s" % version)]
    found = shutil.which(name)
    for prefix in prefixes:
        if found:
            break
        path = os.path.join(prefix, "bin", name) if prefix else None
        if path and os.access(path, os.X_OK):
            found = path
    return found


# LLDB 19 and its Debug Adapter Protocol server (what VS Code's "LLDB DAP" extension runs).
LLDB19 = os.environ.get("BRANCHSTUB_LLDB19") or lldb_beside("lldb", 19)
LLDB_DAP = os.environ.get("BRANCHSTUB_LLDB_DAP") or lldb_beside("lldb-dap", 19)
LLDB19_HOWTO = "bash scripts/lldb-beside.sh 19 --setup-only (scripts/setup-deps.sh does it)"
INFERIOR_SRC = os.path.join(REPO, "tests", "inferiors")
GDB_SCRIPT = os.path.join(REPO, "scripts", "gdb", "branchstub.py")
LLDB_SCRIPT = os.path.join(REPO, "scripts", "lldb", "branchstub_lldb.py")

# Every process started by this test session carries this token in its environment, so
# leftover inferiors are found precisely (not by name alone) even when other runs coexist.
TOKEN = "bs-it-" + uuid.uuid4().hex[:12]
os.environ["BRANCHSTUB_TEST_TOKEN"] = TOKEN

_fallback_dir = None

TIMEOUT_SCALE = float(os.environ.get("BRANCHSTUB_TEST_TIMEOUT_SCALE", "1") or 1)


def stretch(seconds):
    """A deadline in seconds, stretched on slow machines (BRANCHSTUB_TEST_TIMEOUT_SCALE)."""
    return seconds * TIMEOUT_SCALE


def cpu_has(flag):
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return flag in line.split()
    return False


_probe = None


def server_probe():
    """`branchstub --probe` as {mechanism: (works, detail)}, run once (branchstub's probe even
    when the server under test is gdbserver: it tells what this machine can do)."""
    global _probe
    if _probe is None:
        binary = os.path.join(BUILD, "server", "branchstub")
        out = subprocess.run([binary, "--probe"], capture_output=True, text=True, timeout=stretch(60)).stdout
        _probe = {}
        for line in out.splitlines():
            m = re.match(r"(.+?)\s{2,}(yes|no)\s{2,}(.*)$", line)
            if m:
                _probe[m.group(1).strip()] = (m.group(2) == "yes", m.group(3).strip())
    return _probe


def debug_registers_trap():
    """(works, reason): whether DR0-3/DR7 watchpoints trap on this machine (the probe's
    answer; some VMs drop them)."""
    return server_probe().get("debug registers", (False, "the probe printed no debug-register line"))


def watch_args(mode):
    """Server options for a watchpoint mode ("software" or "hardware"); gdbserver has none."""
    return [] if IS_GDBSERVER else ["--watchpoints=" + mode]


# ---------------------------------------------------------------- inferiors

def inferior(name):
    """Path of a built inferior; compiled into a temp dir when the build lacks it."""
    global _fallback_dir
    src = os.path.join(INFERIOR_SRC, name + ".c")
    if not os.path.exists(src) and os.path.exists(src + "c"):
        src += "c"   # a C++ inferior (name.cc)
    built = os.path.join(BUILD, "inferiors", name)
    if os.path.exists(built) and os.path.getmtime(built) >= os.path.getmtime(src):
        return built
    if _fallback_dir is None:
        _fallback_dir = tempfile.mkdtemp(prefix="bs-inferiors-")
    out = os.path.join(_fallback_dir, name)
    if not os.path.exists(out):
        with open(src) as f:   # `CFLAGS: ...` in the source, as tests/inferiors/CMakeLists.txt reads it
            m = re.search(r"CFLAGS: ([^*\n]*)", f.read())
        extra = m.group(1).split() if m else []
        cc = "g++" if src.endswith(".cc") else "gcc"
        subprocess.run([cc, "-g", "-O0", "-fno-omit-frame-pointer", "-pthread"] + extra +
                       ["-o", out, src], check=True, timeout=120)
    return out


def line_of(name, tag):
    """Line number of the `LINE:<tag>` comment in tests/inferiors/<name> (.c or .h)."""
    path = os.path.join(INFERIOR_SRC, name if "." in name else name + ".c")
    pat = re.compile(r"/\*\s*LINE:%s\s*\*/" % re.escape(tag))   # only the exact marker comment
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if pat.search(line):
                return i
    raise KeyError("no LINE:%s in %s" % (tag, path))


def symbol_addr(prog, sym):
    """Address of a symbol in the ELF (link-time, i.e. the PIE offset)."""
    out = subprocess.run(["nm", prog], capture_output=True, text=True, timeout=30).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == sym:
            return int(parts[0], 16)
    raise KeyError(sym)


# ---------------------------------------------------------------- processes

def _proc_env_has_token(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            return ("BRANCHSTUB_TEST_TOKEN=" + TOKEN).encode() in f.read()
    except OSError:
        return False


# States of a process that runs freely (D: in the middle of an I/O, such as a heartbeat write).
RUNNING_STATES = ("S", "R", "D")


def proc_state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            data = f.read()
        return data[data.rindex(")") + 2]
    except (OSError, ValueError):
        return None


def proc_ppid(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            data = f.read()
        return int(data[data.rindex(")") + 2:].split()[1])
    except (OSError, ValueError):
        return None


def find_inferior_processes(names=None, exclude=()):
    """Processes of this test session whose executable is one of our inferiors (or, for
    zombies, whose name is one of them and whose parent is ours)."""
    found = []
    inf_dirs = {os.path.realpath(os.path.join(BUILD, "inferiors"))}
    if _fallback_dir:
        inf_dirs.add(os.path.realpath(_fallback_dir))
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        pid = int(d)
        if pid in exclude or pid == os.getpid():
            continue
        try:
            exe = os.readlink("/proc/%d/exe" % pid)
        except OSError:
            exe = None
        try:
            with open("/proc/%d/comm" % pid) as f:
                comm = f.read().strip()
        except OSError:
            continue
        if names is not None and comm not in [n[:15] for n in names]:
            continue
        if exe is not None:
            if os.path.dirname(exe) in inf_dirs and _proc_env_has_token(pid):
                found.append((pid, comm, proc_state(pid)))
        elif proc_state(pid) == "Z" and names is not None:
            found.append((pid, comm, "Z"))
    return found


def kill_pids(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def wait_until(cond, timeout, what="condition"):
    timeout = stretch(timeout)
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))
        # Polling interval of an observable condition, not synchronisation by sleeping.
        time.sleep(0.02)


def wait_gone(pid, timeout=10):
    def gone():
        st = proc_state(pid)
        return st is None or st == "Z" and proc_ppid(pid) in (None, 1)
    wait_until(gone, timeout, "process %d to go away" % pid)


class Reader:
    """Drains a pipe in a thread, keeping all text; wait_for() blocks with a deadline."""

    def __init__(self, pipe):
        self.text = ""
        self.closed = False
        self._cv = threading.Condition()
        self._t = threading.Thread(target=self._run, args=(pipe,), daemon=True)
        self._t.start()

    def _run(self, pipe):
        while True:
            try:
                chunk = os.read(pipe.fileno(), 65536)
            except OSError:
                chunk = b""
            with self._cv:
                if not chunk:
                    self.closed = True
                    self._cv.notify_all()
                    return
                self.text += chunk.decode("utf-8", "replace")
                self._cv.notify_all()

    def wait_for(self, pattern, timeout):
        """Wait until regex `pattern` matches the text so far; returns the match or None if
        the pipe closed or the deadline passed."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + stretch(timeout)
        with self._cv:
            while True:
                m = rx.search(self.text)
                if m or self.closed:
                    return m
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cv.wait(left)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _extra_server_args(binary, args):
    """BRANCHSTUB_SERVER_ARGS less the options the test sets itself (none for gdbserver)."""
    if "gdbserver" in os.path.basename(binary):
        return []
    given = {a.split("=", 1)[0] for a in args if a.startswith("--")}
    return [a for a in os.environ.get("BRANCHSTUB_SERVER_ARGS", "").split()
            if a.split("=", 1)[0] not in given]


def needs_test_server(args):
    """Whether a server command line passes a TEST ONLY option (only the test build has them)."""
    return any(a.startswith("--test-") for a in args)


class Server:
    """One server process. `args` are the server's arguments with the string "{COMM}"
    standing for the HOST:PORT argument, e.g. ["--once", "{COMM}", prog]. With a TEST ONLY
    --test-* option among them, the test build of the server runs (TEST_SERVER)."""

    def __init__(self, args, binary=None, host="127.0.0.1", env=None, stdin=None, cwd=None):
        self.binary = binary or (TEST_SERVER if needs_test_server(args) else SERVER)
        self.port = None
        self.proc = None
        last = ""
        for _attempt in range(8):
            port = free_port()
            comm = "%s:%d" % (host, port)
            argv = [self.binary] + _extra_server_args(self.binary, args) + [a.replace("{COMM}", comm) for a in args]
            proc = subprocess.Popen(argv, stdin=stdin or subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True, env=env, cwd=cwd)
            err = Reader(proc.stderr)
            out = Reader(proc.stdout)
            m = err.wait_for(r"Listening on port (\d+)|Can't bind address|Can't listen", 30)
            if m and m.group(1):
                self.proc, self.port, self.stderr, self.stdout, self.argv = proc, int(m.group(1)), err, out, argv
                assert self.port == port, "server listens on %d, asked %d" % (self.port, port)
                return
            last = err.text
            _kill_proc(proc)
            if m is None or "bind" not in m.group(0) and "listen" not in m.group(0):
                break
        raise AssertionError("server did not start listening: %r\nstderr:\n%s" % (argv, last))

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def wait_exit(self, timeout=10):
        try:
            return self.proc.wait(stretch(timeout))
        except subprocess.TimeoutExpired:
            return None

    def stop(self):
        if self.proc is not None:
            _kill_proc(self.proc)


def _kill_proc(proc, grace=3):
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
        except OSError:
            pass
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                proc.kill()
            except OSError:
                pass
            proc.wait(10)


class SessionProcs:
    """What a test started; cleaned up by the `procs` fixture, which then asserts that no
    process of an inferior remains."""

    def __init__(self):
        self.servers = []
        self.popens = []
        self.allowed = set()   # pids a test deliberately leaves running until teardown
        # Each test's servers keep their block-patching plans here, not in the user's cache:
        # a test starts cold whatever ran before it (the plan tests name their own).
        self.plan_dir = tempfile.mkdtemp(prefix="bs-plans-")

    def server(self, args, **kw):
        binary = kw.get("binary") or ""
        if ("gdbserver" not in os.path.basename(binary) and args and args[0] not in ("record", "replay")
                and not any(a.startswith("--plan-cache") for a in args)):
            args = ["--plan-cache=" + self.plan_dir] + list(args)
        s = Server(args, **kw)
        self.servers.append(s)
        return s

    def spawn(self, argv, **kw):
        kw.setdefault("stdin", subprocess.DEVNULL)
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        p = subprocess.Popen(argv, start_new_session=True, **kw)
        self.popens.append(p)
        return p

    def spawn_sleeper(self, heartbeat):
        """Starts sleeper writing `heartbeat`; returns (Popen, pid) once it runs."""
        p = self.spawn([inferior("sleeper"), heartbeat])
        out = Reader(p.stdout)
        m = out.wait_for(r"pid (\d+)", 10)
        assert m, "sleeper did not start"
        self.allowed.add(p.pid)
        wait_heartbeat(heartbeat)
        return p, int(m.group(1))

    def cleanup(self):
        for s in self.servers:
            s.stop()
        for p in self.popens:
            _kill_proc(p, grace=0.5)
        left = find_inferior_processes()
        kill_pids([pid for pid, _, _ in left])
        shutil.rmtree(self.plan_dir, ignore_errors=True)
        return [x for x in left if x[0] not in self.allowed]


def read_heartbeat(path):
    try:
        with open(path) as f:
            return int(f.read().strip() or "0")
    except (OSError, ValueError):
        return None


def wait_heartbeat(path, after=None, timeout=10):
    """Waits until the heartbeat file shows a value greater than `after` (or any value)."""
    def ok():
        v = read_heartbeat(path)
        return v is not None and (after is None or v > after)
    wait_until(ok, timeout, "heartbeat in %s to advance past %s" % (path, after))
    return read_heartbeat(path)


# ---------------------------------------------------------------- clients

class Result:
    def __init__(self, argv, rc, out):
        self.argv, self.rc, self.out = argv, rc, out

    def __str__(self):
        return "$ %s\n[rc=%s]\n%s" % (" ".join(self.argv), self.rc, self.out)

    __repr__ = __str__


def _proc_text(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return "?"


def traced_threads_report(limit=64):
    """Every thread traced by a branchstub process: state, wchan, syscall line, pending signals,
    and the tracer's threads' states; for a hang, the CI log then says who waits for what."""
    lines = []
    for pid in sorted(int(d) for d in os.listdir("/proc") if d.isdigit()):
        try:
            _traced_process_report(pid, lines, limit)
        except OSError:  # gone meanwhile
            pass
    return "\n".join(lines) or "(no thread traced by branchstub)"


def _traced_process_report(pid, lines, limit):
    status = _proc_text("/proc/%d/status" % pid)
    m = re.search(r"^TracerPid:\s*(\d+)", status, re.M)
    if not m or m.group(1) == "0" or not _proc_text("/proc/%s/comm" % m.group(1)).startswith("branchstub"):
        return
    tracer = int(m.group(1))
    lines.append("traced process %d (%s) by %d (%s):" % (pid, _proc_text("/proc/%d/comm" % pid), tracer,
                                                         _proc_text("/proc/%d/cmdline" % tracer).replace("\0", " ")))
    for tid in sorted(int(t) for t in os.listdir("/proc/%d/task" % pid) if t.isdigit())[:limit]:
        base = "/proc/%d/task/%d/" % (pid, tid)
        st = _proc_text(base + "stat")
        state = st[st.rfind(")") + 2:].split(" ")[0] if ")" in st else "?"
        pend = re.findall(r"^(SigPnd|ShdPnd):\s*(\S+)", _proc_text(base + "status"), re.M)
        lines.append("  %d %s wchan=%s syscall=%s %s" % (tid, state, _proc_text(base + "wchan"),
                                                         _proc_text(base + "syscall"),
                                                         " ".join("%s=%s" % kv for kv in pend)))
    for tid in sorted(int(t) for t in os.listdir("/proc/%d/task" % tracer) if t.isdigit())[:8]:
        base = "/proc/%d/task/%d/" % (tracer, tid)
        st = _proc_text(base + "stat")
        lines.append("  tracer %d %s wchan=%s syscall=%s" % (tid, st[st.rfind(")") + 2:].split(" ")[0],
                                                           _proc_text(base + "wchan"), _proc_text(base + "syscall")))


def _run(argv, timeout, input=None, env=None):
    timeout = stretch(timeout)
    p = subprocess.Popen(argv, stdin=subprocess.PIPE if input else subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True, env=env)
    try:
        out, _ = p.communicate(input.encode() if input else None, timeout=timeout)
    except subprocess.TimeoutExpired:
        traced = traced_threads_report()  # before the kill: what every traced thread waits in
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        r = Result(argv, "timeout", out.decode("utf-8", "replace"))
        raise AssertionError("client timed out after %ss:\n%s\n%s" % (timeout, r, traced))
    return Result(argv, p.returncode, out.decode("utf-8", "replace"))


GDB_PRELUDE = ["set confirm off", "set pagination off", "set width 0", "set height 0",
               "set startup-with-shell off"]
# Local files instead of vFile transfers (faster); tests that exercise vFile pass
# sysroot=False.
GDB_SYSROOT = ["set sysroot /"]


def gdb(cmds, prog=None, timeout=60, script=None, pyscript=None, prelude=True, sysroot=True):
    """gdb -nx -batch with -ex commands (an error does not stop later -ex commands), then an
    optional CLI script (`script`, -x FILE.gdb) or Python script (`pyscript`, -x FILE.py)."""
    argv = [GDB, "-nx", "-batch"]
    pre = (GDB_PRELUDE if prelude else []) + (GDB_SYSROOT if sysroot else [])
    for c in pre + list(cmds):
        argv += ["-ex", c]
    path = None
    if script is not None or pyscript is not None:
        fd, path = tempfile.mkstemp(prefix="bs-gdb-", suffix=".gdb" if script is not None else ".py")
        with os.fdopen(fd, "w") as f:
            f.write(script if script is not None else pyscript)
        argv += ["-x", path]
    if prog:
        argv.append(prog)
    try:
        return _run(argv, timeout)
    finally:
        if path:
            os.unlink(path)


def target_cmd(server, extended=False):
    return "target %s 127.0.0.1:%d" % ("extended-remote" if extended else "remote", server.port)


def gdb_remote(server, cmds, prog=None, timeout=60, extended=False, pre=(), **kw):
    """A gdb session connected to `server`: `pre` commands, target remote, then `cmds`."""
    return gdb(list(pre) + [target_cmd(server, extended)] + list(cmds), prog=prog,
               timeout=timeout, **kw)


def lldb(cmds, timeout=60, script_file=None, binary=None):
    """lldb -b with -o commands; `binary` another LLDB than LLDB (e.g. LLDB19)."""
    argv = [binary or LLDB, "--no-lldbinit", "-b"]
    for c in cmds:
        argv += ["-o", c]
    return _run(argv, timeout)


# ---------------------------------------------------------------- raw RSP client

def checksum(payload: bytes) -> bytes:
    return b"%02x" % (sum(payload) & 0xff)


def frame(payload) -> bytes:
    if isinstance(payload, str):
        payload = payload.encode()
    return b"$" + payload + b"#" + checksum(payload)


def rle_decode(data: bytes) -> bytes:
    out = bytearray()
    i = 0
    while i < len(data):
        c = data[i]
        if c == 0x2a and out:          # '*'
            n = data[i + 1] - 29
            out += bytes([out[-1]]) * n
            i += 2
        else:
            out.append(c)
            i += 1
    return bytes(out)


class RSP:
    """Minimal client: framing, checksums, acks; no-ack mode optional."""

    def __init__(self, port, host="127.0.0.1", timeout=10):
        timeout = stretch(timeout)
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""
        self.ack = True
        self.timeout = timeout

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send_raw(self, data: bytes):
        self.sock.sendall(data)

    def _fill(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no reply from server")
        r, _, _ = select.select([self.sock], [], [], left)
        if not r:
            raise TimeoutError("no reply from server")
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("server closed the connection")
        self.buf += data

    def recv_packet(self, timeout=None):
        """Next packet payload (RLE expanded), skipping acks; acks it in ack mode."""
        deadline = time.monotonic() + (stretch(timeout) if timeout else self.timeout)
        while True:
            start = self.buf.find(b"$")
            if start >= 0:
                end = self.buf.find(b"#", start)
                if end >= 0 and len(self.buf) >= end + 3:
                    payload = self.buf[start + 1:end]
                    cs = self.buf[end + 1:end + 3]
                    self.buf = self.buf[end + 3:]
                    if self.ack:
                        assert cs == checksum(payload), "bad checksum from server"
                        self.send_raw(b"+")
                    return rle_decode(payload)
            self._fill(deadline)

    def request(self, payload, timeout=None):
        self.send_raw(frame(payload))
        return self.recv_packet(timeout)

    def handshake(self, noack=True):
        self.send_raw(b"+")
        sup = self.request("qSupported:multiprocess+;swbreak+;hwbreak+;vContSupported+")
        if noack and b"QStartNoAckMode+" in sup:
            assert self.request("QStartNoAckMode") == b"OK"
            self.ack = False
        return sup

    def alive(self):
        """True when the server still answers a harmless query."""
        try:
            return self.request("qC", timeout=5) is not None
        except (TimeoutError, ConnectionError, OSError):
            return False
