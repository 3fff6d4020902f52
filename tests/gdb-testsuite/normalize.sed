# Applied to every "STATUS<TAB>file: test name" result line before the comparison, so that a
# test name that carries something varying from run to run (a pid, an address, a time) is
# the same line every run. Add a rule here when two runs of the same build disagree on a
# name (compare build/gdb-testsuite/<set>.results of two runs).
