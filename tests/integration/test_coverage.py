"""Coverage (issue 13): drcov and lcov files, flame graphs and control-flow graphs, checked
against single-step truths that share nothing with the server:

  * `branchstub --coverage FILE PROG` (no client) against tests/tools/sstep_truth, which
    single-steps every thread of PROG from its first instruction to its exit (both run with
    ASLR off and the same minimal environment, so the same code runs);
  * `monitor coverage ...` / `monitor btrace graph` in a real GDB session against truth.py
    (`stepi` from trace_begin to trace_end in a separate session).

The files are read back with tests/integration/coverage_formats.py, strict readers of the
published formats; genhtml (Debian's lcov) must accept the lcov output; the SVGs are parsed
for their structure (boxes, nodes, edges and their labels), never compared as pixels."""
import os
import re
import shutil
import subprocess

import pytest

import coverage_formats as cf
from harness import BUILD, SERVER, gdb_remote, inferior, line_of
from truth import stepi_truth

pytestmark = pytest.mark.branchstub_only

TRUTH_TOOL = os.path.join(BUILD, "tools", "sstep_truth")
ENV = {"PATH": "/usr/bin:/bin"}   # the same environment for the truth and the server
PIE_BASE = 0x555555554000          # where the kernel puts a PIE with ASLR off


def need(tool):
    path = shutil.which(tool)
    assert path, "%s is not installed: bash scripts/setup-deps.sh installs it" % tool
    return path


def sstep_truth(tmp_path, argv, env=None):
    """{(start, size): executions} of every thread of argv, run to its exit."""
    assert os.access(TRUTH_TOOL, os.X_OK), "tests/tools/sstep_truth is not built"
    out = tmp_path / "truth.txt"
    subprocess.run([TRUTH_TOOL, str(out)] + argv, env=env or ENV, timeout=300, capture_output=True)
    blocks, insns = {}, None
    for line in out.read_text().splitlines():
        a = line.split()
        if a[0] == "instructions":
            insns = int(a[1])
        else:
            blocks[(int(a[0], 16), int(a[1], 16))] = int(a[2])
    assert insns, "the truth run executed nothing"
    return blocks, insns


def run_coverage(tmp_path, argv, name, extra=(), env=None):
    path = tmp_path / name
    r = subprocess.run([SERVER, "--coverage", str(path)] + list(extra) + argv, env=env or ENV, timeout=300,
                       capture_output=True, text=True)
    return path, r


def decoded_lines(prog):
    """[(file name, line, address)] of `objdump --dwarf=decodedline` (end-of-sequence rows
    excluded)."""
    out = subprocess.run(["objdump", "--dwarf=decodedline", prog], capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        m = re.match(r"(\S+)\s+(\d+)\s+(0x[0-9a-f]+)", line)
        if m:
            rows.append((os.path.basename(m.group(1)), int(m.group(2)), int(m.group(3), 16)))
    return rows


def module_of(parsed, start):
    for m in parsed["modules"]:
        if m["start"] <= start < m["end"]:
            return m["path"]
    return None


def test_cli_drcov_equals_single_step_truth_every_module(tmp_path):
    prog = inferior("branches")
    truth, _ = sstep_truth(tmp_path, [prog])
    path, r = run_coverage(tmp_path, [prog], "branches.drcov")
    assert r.returncode == 0, r.stderr
    parsed = cf.parse_drcov(path.read_bytes())
    assert parsed["version"] == 2 and parsed["flavor"] == "drcov" and parsed["table_version"] == 4
    got = cf.drcov_blocks(parsed)
    assert got == set(truth), ("missing", sorted(set(truth) - got)[:10], "extra", sorted(got - set(truth))[:10])
    paths = [m["path"] for m in parsed["modules"]]
    assert prog in paths and any("libc.so" in p for p in paths) and any("ld-linux" in p for p in paths)
    # Build ids as readelf reads them.
    for m in parsed["modules"]:
        if m["path"] == prog:
            notes = subprocess.run(["readelf", "-n", prog], capture_output=True, text=True).stdout
            build_id = re.search(r"Build ID: ([0-9a-f]+)", notes).group(1)
            assert "build-id %s" % build_id in r.stderr, r.stderr
            assert m["start"] == PIE_BASE


def test_cli_shared_library_drcov3_and_exit_status(tmp_path):
    prog = inferior("coverage_lib")
    truth, _ = sstep_truth(tmp_path, [prog])
    path, r = run_coverage(tmp_path, [prog], "lib.cov", ["--coverage-format=drcov3"])
    assert r.returncode == 3, r.stderr    # the program's status is ours
    parsed = cf.parse_drcov(path.read_bytes())
    assert parsed["version"] == 3 and parsed["table_version"] == 5
    # Version 3: one entry per segment, offsets from the segment; containing_id = first segment.
    lib = [m for m in parsed["modules"] if m["path"].endswith("libcov_lib.so")]
    assert len(lib) >= 2 and all(m["containing_id"] == lib[0]["id"] for m in lib)
    assert lib[0]["offset"] == 0 and all(m["offset"] > 0 for m in lib[1:])
    got = cf.drcov_blocks(parsed)
    assert got == set(truth), ("missing", sorted(set(truth) - got)[:10], "extra", sorted(got - set(truth))[:10])
    lib_blocks = {b for b in got if module_of(parsed, b[0]).endswith("libcov_lib.so")}
    assert len(lib_blocks) > 10


def test_cli_threads_equal_single_step_truth(tmp_path):
    prog = inferior("coverage_lib")
    # Bound at load: lazily, which of the racing threads' first calls through a PLT slot runs
    # the binder's path (a 10-byte block: `jmp`, `push`) and which finds it bound (its 6-byte `jmp`)
    # depends on timing (CI saw (lib_depth@plt, 6) in one run only).
    env = dict(ENV, LD_BIND_NOW="1")
    truth, _ = sstep_truth(tmp_path, [prog, "3"], env)
    path, r = run_coverage(tmp_path, [prog, "3"], "threads.drcov", env=env)
    assert r.returncode == 3, r.stderr
    parsed = cf.parse_drcov(path.read_bytes())
    got = cf.drcov_blocks(parsed)
    # The program's own modules are deterministic; libc's locking paths depend on timing.
    mine = lambda blocks: {b for b in blocks if not re.search(r"/(libc\.so|ld-linux)", module_of(parsed, b[0]) or "/libc.so")}
    assert mine(got) == mine(truth), ("missing", sorted(mine(truth) - mine(got))[:10])


def test_cli_lcov_genhtml_and_flame_graph(tmp_path):
    need("genhtml")
    prog = inferior("branches")
    path, r = run_coverage(tmp_path, [prog], "branches.info", ["--svg"])
    assert r.returncode == 0, r.stderr
    files = cf.parse_lcov(path.read_text())
    header = [f for f in files if f.endswith("tests/inferiors/branches.h")]
    assert header, files.keys()
    rec = files[header[0]]
    t = stepi_truth("branches")   # one call of region(); main calls it twice
    assert rec["functions"]["region"][1] == 2 and rec["functions"]["classify"][1] == 16
    assert rec["lines"][line_of("branches.h", "switch")] == 16
    assert rec["lines"][line_of("branches.h", "region-return")] == 2
    html = tmp_path / "html"
    g = subprocess.run(["genhtml", "-o", str(html), str(path)], capture_output=True, text=True, timeout=120)
    assert g.returncode == 0, g.stdout + g.stderr
    assert (html / "index.html").exists()
    m = re.search(r"lines\.*: [\d.]+% \((\d+) of (\d+) lines\)", g.stdout)
    assert m and int(m.group(2)) == sum(len(f["lines"]) for f in files.values()), g.stdout
    # The flame graph of the whole run: region's box under main's, classify's under it, with
    # two calls' worth of classify's instructions (the truth counts one call).
    classify_insns = sum(1 for f in t.funcs if f == "classify")
    tree = cf.flame_tree(cf.parse_flame_svg(str(path) + ".svg"))
    classify = [(p, n) for p, n in tree.items() if p[-1] == "classify"]
    assert len(classify) == 1, classify
    p, n = classify[0]
    assert p[0] == "all" and p[-3:] == ("main", "region", "classify") and n == 2 * classify_insns, classify


def _gdb_region(procs, prog, cmds, start="trace_begin", end="trace_end"):
    srv = procs.server(["--once", "{COMM}", prog])
    return gdb_remote(srv, ["break " + start, "continue", "monitor coverage start", "break " + end,
                            "continue", "monitor coverage stop"] + cmds + ["kill"], prog=prog, timeout=120)


def test_monitor_coverage_region_equals_stepi_truth(procs, tmp_path):
    need("genhtml")
    prog = inferior("branches")
    t = stepi_truth("branches")
    drcov, info = tmp_path / "r.drcov", tmp_path / "r.info"
    r = _gdb_region(procs, prog, ["monitor coverage save %s" % drcov, "monitor coverage save %s" % info,
                                  "monitor coverage status"])
    assert "Wrote drcov (version 2) coverage" in r.out and "Wrote lcov coverage" in r.out, r
    parsed = cf.parse_drcov(drcov.read_bytes())
    assert cf.drcov_blocks(parsed) == set(t.blocks()), (sorted(t.blocks()), r)
    # lcov: the lines of the instructions the truth ran (objdump's decoded line table; addr2line
    # of binutils 2.40 names the wrong file for DWARF 5), with the most executions of any.
    rows = decoded_lines(prog)
    expected = {}
    for pc in sorted(set(t.pcs)):
        where = [r for r in rows if r[2] <= pc - PIE_BASE]
        if not PIE_BASE <= pc < PIE_BASE + 0x100000 or not where:
            continue    # libc (getpid): no line information on this system
        name, line = max(where, key=lambda r: r[2])[:2]
        n = t.pcs.count(pc)
        expected.setdefault(name, {})
        expected[name][line] = max(expected[name].get(line, 0), n)
    files = cf.parse_lcov(info.read_text())
    for path, rec in files.items():
        hit = {line: c for line, c in rec["lines"].items() if c}
        assert hit == expected.get(os.path.basename(path), {}), (path, hit, expected)
    g = subprocess.run(["genhtml", "-o", str(tmp_path / "html"), str(info)], capture_output=True, text=True)
    assert g.returncode == 0, g.stdout + g.stderr


def _expected_cfg(prog, t, func):
    """The CFG of func from objdump and the truth: {node: count}, {(from, to): count}."""
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-M", "intel", prog], capture_output=True, text=True).stdout
    body = re.search(r"^[0-9a-f]+ <%s>:\n(.*?)\n\n" % func, dis, re.M | re.S).group(1)
    insns = []
    for line in body.splitlines():
        m = re.match(r"\s+([0-9a-f]+):\s+(\S+)\s*(.*)", line)
        if m:
            insns.append((int(m.group(1), 16) + PIE_BASE, m.group(2), m.group(3)))
    addrs = [a for a, _, _ in insns]
    leaders = {addrs[0]}
    for k, (a, mn, ops) in enumerate(insns):
        if mn.startswith("j") or mn == "ret":
            if mn.startswith("j"):
                tgt = re.match(r"([0-9a-f]+)", ops)
                if tgt and int(tgt.group(1), 16) + PIE_BASE in addrs:
                    leaders.add(int(tgt.group(1), 16) + PIE_BASE)
            if k + 1 < len(insns):
                leaders.add(addrs[k + 1])
    leaders = sorted(leaders)
    block_of = {}
    for a in addrs:
        block_of[a] = max(l for l in leaders if l <= a)
    nodes = {l: t.pcs.count(l) for l in leaders}
    edges = {}
    for k, (a, mn, ops) in enumerate(insns):
        last_of_block = k + 1 == len(insns) or addrs[k + 1] in leaders
        if not last_of_block:
            continue
        if mn.startswith("j"):
            tgt = re.match(r"([0-9a-f]+)", ops)
            if tgt and int(tgt.group(1), 16) + PIE_BASE in addrs:
                edges[(block_of[a], int(tgt.group(1), 16) + PIE_BASE)] = 0
        if mn not in ("jmp", "ret") and k + 1 < len(insns):
            edges[(block_of[a], addrs[k + 1])] = 0
    seq = t.pcs + [t.end]
    for x, y in zip(seq, seq[1:]):
        if x in block_of and y in nodes and (block_of[x], y) in edges and (y != x or True):
            last = max(a for a in addrs if block_of[a] == block_of[x])
            if x == last:
                edges[(block_of[x], y)] += 1
    return nodes, edges


def test_monitor_cfg_and_history_flame_graph(procs, tmp_path):
    need("dot")
    prog = inferior("branches")
    t = stepi_truth("branches")
    cfg, flame = tmp_path / "region.svg", tmp_path / "flame.svg"
    srv = procs.server(["--once", "{COMM}", prog])
    r = gdb_remote(srv, ["break trace_begin", "continue", "monitor coverage start", "record btrace",
                         "break trace_end", "continue", "monitor coverage cfg region %s" % cfg,
                         "monitor btrace graph %s" % flame, "kill"], prog=prog, timeout=120)
    assert "Wrote the control-flow graph of region" in r.out and "Wrote a flame graph" in r.out, r
    nodes, edges = cf.parse_graphviz_svg(str(cfg))
    exp_nodes, exp_edges = _expected_cfg(prog, t, "region")
    assert sorted(nodes) == sorted("b_%x" % a for a in exp_nodes), (nodes, exp_nodes)
    assert edges == {("b_%x" % a, "b_%x" % b): str(c) for (a, b), c in exp_edges.items()}, (edges, exp_edges)
    # The history's flame graph: every instruction of the region once, call paths as the truth's
    # calls and returns make them (the region begins inside trace_begin, which returns to main).
    tree = cf.flame_tree(cf.parse_flame_svg(str(flame)))
    assert tree[("all",)] == t.count, (tree, t.count)
    # The truth's tree: calls push, returns pop, a jump into another function (PLT stub to
    # its target) replaces the top frame; the region begins in trace_begin, called by main.
    expected, stack = {}, ["main", t.funcs[0]]
    for i, f in enumerate(t.funcs):
        if i and f != t.funcs[i - 1]:
            asm = next((b[2] for b in t.branches if b[0] == t.pcs[i - 1] and b[1] == t.pcs[i]), "")
            if asm.startswith("call"):
                stack.append(f)
            elif asm.startswith("ret") and len(stack) >= 2 and stack[-2] == f:
                stack.pop()
            else:
                stack[-1] = f
        for k in range(len(stack) + 1):
            path = ("all",) + tuple(stack[:k])
            expected[path] = expected.get(path, 0) + 1
    # Aliases: GDB may name libc's getpid __GI_getpid where the symbol table's plainest is getpid.
    plain = lambda tr: {tuple(re.sub(r"^(__GI_|_+)", "", x) for x in p): n for p, n in tr.items()}
    assert plain(tree) == plain(expected), (sorted(tree.items()), sorted(expected.items()))


def test_monitor_coverage_threads_lcov_counts(procs, tmp_path):
    # Four workers blocked at a barrier when coverage starts; each then runs region() once.
    prog = inferior("branches_threads")
    info = tmp_path / "t.info"
    srv = procs.server(["--once", "{COMM}", prog])
    r = gdb_remote(srv, ["break threads_ready", "continue", "monitor coverage start", "break exit", "continue",
                         "monitor coverage save %s" % info, "kill"], prog=prog, timeout=120)
    assert "Wrote lcov coverage" in r.out, r
    files = cf.parse_lcov(info.read_text())
    rec = next(v for k, v in files.items() if k.endswith("branches.h"))
    assert rec["functions"]["region"][1] == 4 and rec["functions"]["classify"][1] == 32, rec["functions"]
    assert rec["lines"][line_of("branches.h", "switch")] == 4 * 8


def test_coverage_command_errors_and_usage(procs, tmp_path):
    prog = inferior("branches")
    srv = procs.server(["--once", "{COMM}", prog])
    r = gdb_remote(srv, ["monitor coverage save %s/x.drcov" % tmp_path, "monitor coverage start",
                         "monitor coverage start", "monitor coverage save", "monitor coverage save x y z w",
                         "monitor coverage save %s/x.cov bogus" % tmp_path, "monitor coverage cfg nosuchfunc %s/c.svg" % tmp_path,
                         "monitor coverage save /nonexistent-dir/x.drcov", "monitor btrace graph %s/f.svg" % tmp_path,
                         "monitor coverage frob", "monitor coverage stop", "monitor coverage stop", "kill"],
                   prog=prog)
    out = r.out
    assert "No coverage recorded: use 'monitor coverage start'." in out
    assert "Coverage is already being recorded." in out
    assert out.count("Usage: monitor coverage save FILE") == 2
    assert "Unknown format bogus" in out
    assert "No function named nosuchfunc." in out
    assert "Cannot write /nonexistent-dir/x.drcov" in out
    assert "is not being recorded" in out
    assert "Unknown coverage command" in out
    assert "Stopped recording coverage." in out and "Coverage is not being recorded." in out
    assert srv.alive() or srv.wait_exit(10) == 0


def test_no_file_writes_refuses_coverage_files(procs, tmp_path):
    prog = inferior("branches")
    srv = procs.server(["--once", "--no-file-writes", "{COMM}", prog])
    r = gdb_remote(srv, ["monitor coverage start", "monitor coverage save %s/x.drcov" % tmp_path,
                         "monitor coverage cfg main %s/c.svg" % tmp_path, "kill"], prog=prog)
    assert r.out.count("Refused: the server was started with --no-file-writes.") == 2, r
    assert not os.listdir(tmp_path)


def test_cli_usage_errors():
    for args, said in ((["--coverage"], "--coverage"), (["--coverage", "x.drcov"], "no program"),
                       (["--svg", ":0", "prog"], "--svg needs --coverage"),
                       (["--coverage-format=lcov", ":0", "prog"], "--coverage-format needs --coverage"),
                       (["--coverage", "x", "--coverage-format=bogus", "prog"], "coverage-format")):
        r = subprocess.run([SERVER] + args, capture_output=True, text=True, timeout=30)
        assert r.returncode != 0 and said in (r.stdout + r.stderr), (args, r.stdout, r.stderr)
