#!/usr/bin/env python3
"""The shape of the code, checked: no source file in protocol/, backend/ or server/ over
MAX_LINES lines, and no include runs back up: protocol/ includes neither backend/ nor server/, backend/ includes
neither protocol/ nor server/, and inside backend/ a file includes only its own level or lower
ones (the levels of docs/architecture.md, "Map of the folders"). Prints every offending include
and exits 1 if there is one."""
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")

# Plain values every level may use.
BASE = {"backend/error.h", "backend/memory_region.h", "backend/btrace/branch.h", "backend/btrace/branch_cursor.h"}
# Folder (longest prefix wins) -> level. The backend's root headers (process.h, features.h) are
# the interface the server sees: above the parts they are made of, below what implements them.
LEVELS = [
    ("backend/ptrace/", 1), ("backend/x86/", 1), ("backend/host/", 1),
    ("backend/points/", 2), ("backend/engine/", 2),
    ("backend/btrace/", 3), ("backend/coverage/", 3), ("backend/probe/", 3), ("backend/trace/", 3),
    ("backend/", 4),
    ("backend/linux/", 5), ("backend/tls/", 5),
    ("backend/replay/", 6),
]


MAX_LINES = 700


def level(path):
    best = None
    for prefix, lvl in LEVELS:
        if path.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, lvl)
    return best[1] if best else None


def main():
    bad = []
    inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    for top in ("protocol", "backend", "server"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if not name.endswith((".h", ".cc")):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), ROOT)
                with open(os.path.join(ROOT, path)) as f:
                    text = f.read()
                if text.count("\n") > MAX_LINES:
                    bad.append((path, "", "%d lines, over %d: split it by job" % (text.count("\n"), MAX_LINES)))
                for target in inc.findall(text):
                    if top == "protocol" and target.startswith(("backend/", "server/")):
                        bad.append((path, target, "protocol/ knows no backend or server"))
                    elif top == "backend" and target.startswith(("protocol/", "server/")):
                        bad.append((path, target, "backend/ knows no packets or server"))
                    elif top == "backend" and target.startswith("backend/") and target not in BASE:
                        if level(target) > level(path):
                            bad.append((path, target, "level %d includes level %d" % (level(path), level(target))))
    for path, target, why in bad:
        print("%s%s: %s" % (path, " includes " + target if target else "", why))
    print("code shape: %d problem(s)" % len(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
