"""Independent readers for the coverage files branchstub writes, following the published
formats strictly (they share no code with the server):

  drcov  DynamoRIO's drcov log (ext/drcovlib: drcovlib.h bb_entry_t, drcovlib.c version and
         table printers, modules.c module table versions 2-5), the format Lighthouse,
         Cartographer and bncov read. Lighthouse's reader accepts only "DRCOV VERSION: 2".
  lcov   geninfo(1)'s tracefile format (TN/SF/FN/FNDA/FNF/FNH/DA/LF/LH/end_of_record).
  svg    flame graphs (our <g class="frame"> boxes) and Graphviz's SVG (<g class="node">,
         <g class="edge"> with <title>)."""
import re
import struct
import xml.etree.ElementTree as ET

# Columns each module table version has on Linux (modules.c; Windows adds checksum, timestamp).
DRCOV_COLUMNS = {
    2: ["id", "base", "end", "entry", "path"],
    3: ["id", "containing_id", "start", "end", "entry", "path"],
    4: ["id", "containing_id", "start", "end", "entry", "offset", "path"],
    5: ["id", "containing_id", "start", "end", "entry", "offset", "preferred_base", "path"],
}


class FormatError(Exception):
    pass


def _expect(cond, what):
    if not cond:
        raise FormatError(what)


def parse_drcov(data: bytes):
    """{version, flavor, table_version, modules: [dict], bbs: [(start, size, mod_id)]}."""
    pos = 0

    def line():
        nonlocal pos
        end = data.index(b"\n", pos)
        text = data[pos:end].decode("utf-8")
        pos = end + 1
        return text

    m = re.fullmatch(r"DRCOV VERSION: (\d+)", line())
    _expect(m, "first line is not 'DRCOV VERSION: N'")
    version = int(m.group(1))
    _expect(version in (2, 3), "DRCOV VERSION %d" % version)
    m = re.fullmatch(r"DRCOV FLAVOR: (\S.*)", line())
    _expect(m, "second line is not 'DRCOV FLAVOR: ...'")
    flavor = m.group(1)
    m = re.fullmatch(r"Module Table: version (\d+), count (\d+)", line())
    _expect(m, "no 'Module Table: version V, count N' line")
    table_version, count = int(m.group(1)), int(m.group(2))
    _expect(table_version in DRCOV_COLUMNS, "module table version %d" % table_version)
    m = re.fullmatch(r"Columns: (.*)", line())
    _expect(m, "no Columns line")
    columns = m.group(1).split(", ")
    _expect(columns == DRCOV_COLUMNS[table_version],
            "columns %r are not version %d's %r" % (columns, table_version, DRCOV_COLUMNS[table_version]))
    modules = []
    for i in range(count):
        fields = line().split(", ", len(columns) - 1)   # the path may hold ", "
        _expect(len(fields) == len(columns), "module line %d has %d fields" % (i, len(fields)))
        mod = {}
        for name, value in zip(columns, fields):
            value = value.strip()
            if name == "path":
                mod[name] = value
            elif name in ("id", "containing_id"):
                _expect(re.fullmatch(r"\d+", value), "%s %r is not decimal" % (name, value))
                mod[name] = int(value)
            else:
                _expect(re.fullmatch(r"(0x)?[0-9a-f]+", value), "%s %r is not hex" % (name, value))
                mod[name] = int(value, 16)
        _expect(mod["id"] == i, "module ids are not 0..N-1 in order")
        mod.setdefault("start", mod.get("base"))
        _expect(mod["start"] < mod["end"], "module %d is empty" % i)
        modules.append(mod)
    for mod in modules:
        _expect(mod.get("containing_id", mod["id"]) <= mod["id"], "containing_id after the module")
    m = re.fullmatch(r"BB Table: (\d+) bbs", line())
    _expect(m, "no 'BB Table: N bbs' line")
    nbbs = int(m.group(1))
    body = data[pos:]
    _expect(len(body) == 8 * nbbs, "BB table holds %d bytes, not 8 x %d" % (len(body), nbbs))
    bbs = []
    for k in range(nbbs):
        start, size, mod_id = struct.unpack_from("<IHH", body, 8 * k)
        _expect(mod_id < count, "bb %d names module %d of %d" % (k, mod_id, count))
        _expect(size > 0, "bb %d is empty" % k)
        mod = modules[mod_id]
        _expect(start + size <= mod["end"] - mod["start"], "bb %d runs past its module" % k)
        bbs.append((start, size, mod_id))
    return {"version": version, "flavor": flavor, "table_version": table_version,
            "modules": modules, "bbs": bbs}


def drcov_blocks(parsed):
    """Absolute (start, size) of every bb: relative to the module (v2) or segment (v3) start."""
    return {(parsed["modules"][mod]["start"] + start, size) for start, size, mod in parsed["bbs"]}


def parse_lcov(text):
    """{source path: {"lines": {line: count}, "functions": {name: (line, count)}}}; checks
    the record structure and the summary counts."""
    files, cur = {}, None
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw:
            continue
        tag, _, value = raw.partition(":")
        if tag == "TN":
            _expect(cur is None, "line %d: TN inside a record" % n)
        elif tag == "SF":
            _expect(cur is None, "line %d: SF inside a record" % n)
            cur = files.setdefault(value, {"lines": {}, "functions": {}, "fn_lines": {}})
            summary = {}
        elif tag == "end_of_record":
            _expect(cur is not None, "line %d: end_of_record outside a record" % n)
            _expect(summary.get("LF") == len(cur["lines"]), "LF")
            _expect(summary.get("LH") == sum(1 for c in cur["lines"].values() if c > 0), "LH")
            _expect(summary.get("FNF") == len(cur["functions"]), "FNF")
            _expect(summary.get("FNH") == sum(1 for _, c in cur["functions"].values() if c > 0), "FNH")
            cur = None
        else:
            _expect(cur is not None, "line %d: %s outside a record" % (n, tag))
            if tag == "DA":
                line, count = value.split(",")[:2]
                cur["lines"][int(line)] = int(count)
            elif tag == "FN":
                line, name = value.split(",", 1)
                cur["fn_lines"][name] = int(line)
            elif tag == "FNDA":
                count, name = value.split(",", 1)
                _expect(name in cur["fn_lines"], "line %d: FNDA before FN for %s" % (n, name))
                cur["functions"][name] = (cur["fn_lines"][name], int(count))
            elif tag in ("LF", "LH", "FNF", "FNH"):
                summary[tag] = int(value)
            else:
                raise FormatError("line %d: unknown tag %s" % (n, tag))
    _expect(cur is None, "the last record has no end_of_record")
    for f in files.values():
        del f["fn_lines"]
    return files


SVG = "{http://www.w3.org/2000/svg}"


def parse_flame_svg(path):
    """Frames as [(name, instructions, x, y, width)] from the boxes' titles and rects."""
    frames = []
    for g in ET.parse(path).getroot().iter(SVG + "g"):
        if g.get("class") != "frame":
            continue
        m = re.fullmatch(r"(.*) \((\d+) instructions, [\d.]+%\)", g.find(SVG + "title").text)
        _expect(m, "frame title %r" % g.find(SVG + "title").text)
        r = g.find(SVG + "rect")
        frames.append((m.group(1), int(m.group(2)), float(r.get("x")), float(r.get("y")), float(r.get("width"))))
    return frames


def flame_tree(frames):
    """{path tuple: instructions} from the geometry: a box sits on the box below it whose
    x-range holds it (the root is the lowest box)."""
    by_y = sorted(frames, key=lambda f: -f[3])
    paths, placed = {}, []
    for name, insns, x, y, w in by_y:
        parent = None
        for p in placed:
            pname, pinsns, px, py, pw, ppath = p
            if py > y and abs(py - y - 17) < 0.5 and px - 0.01 <= x and x + w <= px + pw + 0.01:
                parent = p
        path = (parent[5] if parent else ()) + (name,)
        paths[path] = paths.get(path, 0) + insns
        placed.append((name, insns, x, y, w, path))
    return paths


def parse_graphviz_svg(path):
    """(nodes, edges) of a `dot -Tsvg` file: node titles, and {(from, to): label}."""
    root = ET.parse(path).getroot()
    nodes, edges = [], {}
    for g in root.iter(SVG + "g"):
        cls = g.get("class")
        title = g.find(SVG + "title")
        if cls == "node":
            nodes.append(title.text)
        elif cls == "edge":
            a, b = title.text.split("->")
            texts = [t.text for t in g.iter(SVG + "text")]
            edges[(a, b)] = texts[0] if texts else None
    return nodes, edges
