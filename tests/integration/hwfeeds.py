"""TEST ONLY branch data for the test build of the server's --test-bts-ring, --test-lbr-snapshots
and --test-pt-aux (tests/support; the shipped branchstub has no such options): what the kernel or the
msr_helper module would have given on hardware with BTS, LBR or PT, built from the
single-step truth of a test inferior (truth.py). Written independently of the server's readers
(from the perf ABI: include/uapi/linux/perf_event.h), so a reader bug cannot cancel out.

The BTS ring is written while GDB runs: GDB sources this module (its Python is the system's) and
calls BtsFeed.advance() at each stop the test makes, which appends the branches the thread took
since the previous stop, as the kernel's BTS drain would have before the stop was reported."""
import json
import os
import struct

PAGE = 4096
# struct perf_event_mmap_page
DATA_HEAD, DATA_OFFSET, DATA_SIZE = 1024, 1040, 1048
AUX_HEAD, AUX_OFFSET, AUX_SIZE = 1056, 1072, 1080
PERF_RECORD_SAMPLE = 9
KERNEL = 0xffffffff81000000   # a kernel address (bit 63 set): the readers must drop its records


def branch_table(truth):
    """{index in truth.pcs: (from, to)} for every taken branch, and the pc after the last one."""
    pcs = truth.pcs
    table = {}
    bi = 0
    branches = [b for b in truth.branches if b[2] != "<signal>"]
    for i, pc in enumerate(pcs):
        nxt = pcs[i + 1] if i + 1 < len(pcs) else truth.end
        if bi < len(branches) and branches[bi][0] == pc and branches[bi][1] == nxt:
            table[i] = (pc, nxt)
            bi += 1
    assert bi == len(branches), "truth branches do not follow its pcs"
    return table


def index_of(truth, pc, after, nth=1):
    """Index in truth.pcs of the nth arrival at pc after index `after` (len(pcs) for the end)."""
    if pc == truth.end and nth == 1:
        return len(truth.pcs)
    seen = 0
    for i in range(after + 1, len(truth.pcs)):
        if truth.pcs[i] == pc:
            seen += 1
            if seen == nth:
                return i
    raise AssertionError("pc %#x reached %d times after index %d, not %d" % (pc, seen, after, nth))


def branches_between(truth, first, last):
    """Taken branches of the instructions truth.pcs[first:last], oldest first."""
    table = branch_table(truth)
    return [table[i] for i in range(first, last) if i in table]


class PerfRing:
    """A file laid out like perf's BTS mapping: the header page, then `data_size` bytes of
    PERF_RECORD_SAMPLE {header, ip = from, addr = to} records, written at data_head and
    wrapping, in overwrite mode (nobody reads data_tail)."""

    def __init__(self, path, data_size):
        self.path, self.size = path, data_size
        with open(path, "wb") as f:
            f.write(bytearray(PAGE + data_size))
        self._put(DATA_OFFSET, PAGE)
        self._put(DATA_SIZE, data_size)
        self.head = 0

    def _put(self, off, value):
        with open(self.path, "r+b") as f:
            f.seek(off)
            f.write(struct.pack("<Q", value))

    def append(self, branches):
        data = b"".join(struct.pack("<IHHQQ", PERF_RECORD_SAMPLE, 0, 24, frm, to) for frm, to in branches)
        with open(self.path, "r+b") as f:
            pos = self.head % self.size
            first = data[:self.size - pos]
            f.seek(PAGE + pos)
            f.write(first)
            rest = data[len(first):]
            while rest:            # more than the whole buffer wraps again (overwrite mode)
                f.seek(PAGE)
                f.write(rest[:self.size])
                rest = rest[self.size:]
            self.head += len(data)
            f.seek(DATA_HEAD)
            f.write(struct.pack("<Q", self.head))   # data_head last, as the kernel publishes it


class BtsFeed:
    """Driven from inside GDB: advance() at a stop writes what BTS recorded since the last one."""

    def __init__(self, config_path):
        with open(config_path) as f:
            c = json.load(f)

        class T:
            pass
        self.truth = T()
        self.truth.pcs, self.truth.branches, self.truth.end = c["pcs"], c["branches"], c["end"]
        self.ring = PerfRing(c["ring"], c["data_size"])
        self.kernel_every = c.get("kernel_every", 0)
        self.pos = 0             # truth index of the instruction the thread stopped at
        self.written = 0

    def advance(self, nth=1, pc=None):
        if pc is None:
            import gdb
            pc = int(gdb.parse_and_eval("$pc")) & (2 ** 64 - 1)
        j = index_of(self.truth, pc, self.pos, nth)
        recs = []
        for b in branches_between(self.truth, self.pos, j):
            recs.append(b)
            self.written += 1
            if self.kernel_every and self.written % self.kernel_every == 0:
                recs.append((KERNEL + self.written, b[1]))   # an interrupt's return to user mode
        self.ring.append(recs)
        self.pos = j


def bts_feed_config(path, truth, ring, data_size, kernel_every=0):
    with open(path, "w") as f:
        json.dump({"pcs": truth.pcs, "branches": truth.branches, "end": truth.end, "ring": ring,
                   "data_size": data_size, "kernel_every": kernel_every}, f)


def gdb_bts_feed(config_path):
    """GDB commands that create the feed (before `record btrace`)."""
    here = os.path.dirname(os.path.abspath(__file__))
    return ["python import sys; sys.path.insert(0, %r); import hwfeeds; bs_feed = hwfeeds.BtsFeed(%r)"
            % (here, config_path)]


def write_lbr_snapshots(path, truth, arm_index, stops, depth, count=True):
    """The module's snapshot at each stop: the last `depth` user branches since the thread was
    armed (the module clears the stack when it first switches the thread in), newest first, and
    the taken-branch counter's total. `stops` are truth indexes (len(pcs) = the end)."""
    lines = ["# TEST ONLY LBR snapshots from the single-step truth", "depth %d" % depth]
    for j in stops:
        since = branches_between(truth, arm_index, j)
        window = since[-depth:]
        ip = truth.pcs[j] if j < len(truth.pcs) else truth.end
        words = ["snap", "%x" % ip] + (["taken=%d" % len(since)] if count else [])
        words += ["%x:%x" % b for b in reversed(window)]
        lines.append(" ".join(words))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


class AuxRing:
    """A file laid out like perf's PT mapping: the user page (aux_offset, aux_size, aux_head),
    then the AUX area, written at aux_head and wrapping inside the buffer (overwrite mode)."""

    def __init__(self, path, aux_size, create=True):
        self.path, self.size = path, aux_size
        if create:
            with open(path, "wb") as f:
                f.write(bytearray(PAGE + aux_size))
            with open(path, "r+b") as f:
                f.seek(AUX_OFFSET)
                f.write(struct.pack("<QQ", PAGE, aux_size))
        with open(path, "rb") as f:
            f.seek(AUX_HEAD)
            self.head = struct.unpack("<Q", f.read(8))[0]

    def write(self, data):
        """Never truncates: the server has the file mapped."""
        with open(self.path, "r+b") as f:
            while data:
                n = min(len(data), self.size - self.head)
                f.seek(PAGE + self.head)
                f.write(data[:n])
                data = data[n:]
                self.head = (self.head + n) % self.size
            f.seek(AUX_HEAD)
            f.write(struct.pack("<Q", self.head))


class PtFeed:
    """Driven from inside GDB at the stop that ends the traced path: the stream the CPU would
    have written for it (pt_tool encode, libipt's encoder) goes into the AUX ring."""

    def __init__(self, config_path):
        with open(config_path) as f:
            self.c = json.load(f)

    def write(self):
        import subprocess
        import gdb
        c = self.c
        pid = gdb.selected_inferior().pid
        with open("/proc/%d/maps" % pid) as src, open(c["maps"], "w") as dst:
            dst.write(src.read())
        subprocess.run([c["tool"], "encode", c["maps"], c["pcs"], c["stream"], str(c["psb_every"])], check=True)
        with open(c["stream"], "rb") as f:
            AuxRing(c["aux"], c["aux_size"], create=False).write(f.read())


def pt_feed_config(path, truth, tmp, aux, aux_size, tool, psb_every=0):
    pcs = os.path.join(tmp, "pcs")
    with open(pcs, "w") as f:
        f.write("".join("%x\n" % pc for pc in truth.pcs) + "end %x\n" % truth.end)
    with open(path, "w") as f:
        json.dump({"pcs": pcs, "maps": os.path.join(tmp, "maps"), "stream": os.path.join(tmp, "stream"),
                   "aux": aux, "aux_size": aux_size, "tool": tool, "psb_every": psb_every}, f)


def gdb_pt_feed(config_path):
    here = os.path.dirname(os.path.abspath(__file__))
    return ["python import sys; sys.path.insert(0, %r); import hwfeeds; pt_feed = hwfeeds.PtFeed(%r)"
            % (here, config_path)]
