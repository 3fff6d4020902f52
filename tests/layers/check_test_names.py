#!/usr/bin/env python3
"""Every Catch2 test case runs under ctest: a TEST_CASE name with ';' is split by ctest (a list
separator) into names Catch matches to nothing, and such a "test" passes without running.
Prints each offending name and exits 1 if there is one."""
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")


def main():
    bad = []
    name = re.compile(r'\bTEST_CASE\s*\(\s*"((?:[^"\\]|\\.)*)"')
    for folder, _, files in os.walk(os.path.join(ROOT, "tests")):
        for f in files:
            if not f.endswith((".cc", ".cpp", ".h")):
                continue
            path = os.path.join(folder, f)
            with open(path, encoding="utf-8", errors="replace") as fh:
                for m in name.finditer(fh.read()):
                    if ";" in m.group(1):
                        bad.append("%s: %s" % (os.path.relpath(path, ROOT), m.group(1)))
    for b in bad:
        print("test name with ';' (ctest would run nothing of it):", b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
