"""Host I/O writes (`remote put`, `remote get`, `remote delete`: vFile open for writing,
pwrite, unlink) are allowed by default, as in gdbserver (gdb.server/file-transfer.exp);
--no-file-writes refuses them and still lets GDB read files."""
import os

import pytest

from harness import IS_GDBSERVER, gdb_remote, inferior

BASIC = inferior("basic")


def test_put_get_delete(procs, tmp_path):
    src = tmp_path / "local.bin"
    src.write_bytes(bytes(range(256)) * 40 + b"$#}*end")  # bytes that need escaping, > one packet
    remote = tmp_path / "remote.bin"
    back = tmp_path / "back.bin"
    srv = procs.server(["--once", "{COMM}", BASIC])
    r = gdb_remote(srv, ["remote put %s %s" % (src, remote), "remote get %s %s" % (remote, back),
                         "remote delete %s" % remote], prog=BASIC)
    # (GDB in batch mode says nothing on success.)
    assert "error" not in r.out.lower(), r
    assert back.read_bytes() == src.read_bytes()
    assert not remote.exists()


@pytest.mark.skipif(IS_GDBSERVER, reason="--no-file-writes is branchstub's opt-out")
def test_no_file_writes_refuses_writes_but_not_reads(procs, tmp_path):
    src = tmp_path / "local.txt"
    src.write_text("hello\n")
    keep = tmp_path / "keep.txt"
    keep.write_text("kept\n")
    back = tmp_path / "back.txt"
    srv = procs.server(["--once", "--no-file-writes", "{COMM}", BASIC])
    r = gdb_remote(srv, ["remote put %s %s" % (src, tmp_path / "new.txt"),
                         "remote delete %s" % keep, "remote get %s %s" % (keep, back)], prog=BASIC)
    assert r.out.count("Remote I/O error: Permission denied") == 2, r
    assert not (tmp_path / "new.txt").exists()
    assert keep.read_text() == "kept\n"
    assert back.read_text() == "kept\n", r
    assert os.path.exists(back)
