"""Bulk memory reads through GDB 13: `dump memory` content, and the server's read-ahead never
serving a block older than a write (issue 2)."""
import os

from harness import gdb_remote, inferior

MEMDUMP = inferior("memdump")
MiB = 1 << 20


def expected(offset, size):
    """memdump.c's buffer content: byte i is ((i * 2654435761) mod 2^32) >> 24."""
    return bytes((((i * 2654435761) & 0xffffffff) >> 24) for i in range(offset, offset + size))


def test_dump_memory_and_write_between_bulk_reads(procs, tmp_path):
    srv = procs.server(["--once", "{COMM}", MEMDUMP])
    first, second, third = (str(tmp_path / n) for n in ("first.bin", "second.bin", "third.bin"))
    r = gdb_remote(srv, [
        "break ready", "continue",
        "set $b = buf",                       # a convenience variable: no read between below
        "dump binary memory %s $b $b+%d" % (first, MiB),
        # The next block is what a read-ahead would have prepared; the write must drop it.
        "set var *(unsigned char *)($b+%d) = 0x55" % MiB,
        "dump binary memory %s $b+%d $b+%d" % (second, MiB, 2 * MiB),
        # And again with the write further into a block that is read ahead.
        "set var *(unsigned char *)($b+%d) = 0xaa" % (3 * MiB - 1),
        "dump binary memory %s $b+%d $b+%d" % (third, 2 * MiB, 3 * MiB),
        "print/x *(unsigned char *)($b+%d)" % MiB,
        "kill"], prog=MEMDUMP, timeout=120)
    assert os.path.getsize(first) == MiB, r
    with open(first, "rb") as f:
        assert f.read() == expected(0, MiB), "dumped memory differs from the program's buffer"
    with open(second, "rb") as f:
        data = f.read()
    assert data[0] == 0x55, "a block read after a write shows the old byte %#x" % data[0]
    assert data[1:] == expected(MiB + 1, MiB - 1)
    with open(third, "rb") as f:
        data = f.read()
    assert data[-1] == 0xaa, "a block read after a write shows the old byte %#x" % data[-1]
    assert data[:-1] == expected(2 * MiB, MiB - 1)
    assert "$1 = 0x55" in r.out, r
