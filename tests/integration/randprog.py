"""Random small C programs for differential tests of the branch-trace sources
(test_btrace_patch_fuzz.py): straight-line arithmetic, if/else, for loops, switch statements
(dense enough for a jump table at -O1/-O2), calls to other small functions, calls through a
function pointer table and recursion. Everything is `unsigned long` (no undefined behaviour:
wrapping arithmetic, divisors forced odd, shifts masked), the functions called form a DAG (f_i
calls only f_j, j > i) and loop bounds are small, so every program ends quickly and does the
same thing on every run.

    generate(seed) -> C source text; main() calls run(2) (warm-up), trace_begin(), run(N)
    (N from the seed: a loop calling f0, the pointer table, rec and other f_i), trace_end(),
    then prints "result=<value>".
"""
import random


class _Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)
        self.nfuncs = self.r.randint(3, 6)
        self.lines = []

    def var(self, names):
        return self.r.choice(names)

    def expr(self, names, depth=0):
        r = self.r
        if depth > 2 or r.random() < 0.3:
            return r.choice([self.var(names), str(r.randint(0, 99)) + "UL"])
        a, b = self.expr(names, depth + 1), self.expr(names, depth + 1)
        op = r.choice(["+", "-", "*", "^", "&", "|", "/", "%", "<<", ">>"])
        if op in ("/", "%"):
            return "(%s %s (%s | 1UL))" % (a, op, b)
        if op in ("<<", ">>"):
            return "(%s %s (%s & 15UL))" % (a, op, b)
        return "(%s %s %s)" % (a, op, b)

    def cond(self, names):
        op = self.r.choice(["<", ">", "==", "!=", "<=", ">="])
        return "(%s %s %s)" % (self.expr(names, 1), op, self.expr(names, 1))

    def call(self, fi, names):
        r = self.r
        callees = list(range(fi + 1, self.nfuncs))
        kind = r.random()
        args = "%s, %s" % (self.expr(names, 2), self.expr(names, 2))
        if kind < 0.2:
            return "rec(%s & 7UL)" % self.var(names)
        if kind < 0.4:
            return "fp[%s & %dUL](%s)" % (self.var(names), 3, args)
        if callees:
            return "f%d(%s)" % (r.choice(callees), args)
        return "leaf(%s)" % args

    def block(self, fi, names, depth, indent, in_loop):
        r = self.r
        out = []
        for _ in range(r.randint(1, 4 if depth else 6)):
            k = r.random()
            pad = "    " * indent
            assigned = [n for n in names if not n.startswith("i")]   # never a loop counter
            target = self.var(assigned)
            if k < 0.35 or depth >= 2:
                out.append("%s%s = %s;" % (pad, target, self.expr(names)))
            elif k < 0.55:
                out.append("%sif %s {" % (pad, self.cond(names)))
                out += self.block(fi, names, depth + 1, indent + 1, in_loop)
                if r.random() < 0.6:
                    out.append("%s} else {" % pad)
                    out += self.block(fi, names, depth + 1, indent + 1, in_loop)
                out.append("%s}" % pad)
            elif k < 0.7 and not in_loop:
                iv = "i%d" % indent
                out.append("%sfor (unsigned long %s = 0; %s < %dUL; %s++) {" % (pad, iv, iv, r.randint(1, 5), iv))
                out += self.block(fi, names + [iv], depth + 1, indent + 1, True)
                out.append("%s}" % pad)
            elif k < 0.85:
                ncases = r.randint(3, 9)
                out.append("%sswitch (%s %% %dUL) {" % (pad, self.var(names), ncases + 1))
                for c in range(ncases):
                    out.append("%scase %d: %s = %s; %s" % (pad, c, self.var(assigned), self.expr(names, 1),
                                                            r.choice(["break;", "break;", ""])))
                out.append("%sdefault: %s += %dUL; break;" % (pad, self.var(assigned), r.randint(1, 50)))
                out.append("%s}" % pad)
            elif not in_loop or depth == 1:
                out.append("%s%s += %s;" % (pad, target, self.call(fi, names)))
            else:
                out.append("%s%s ^= %s;" % (pad, target, self.expr(names)))
        return out

    def source(self):
        r = self.r
        out = ["#include <stdio.h>", "",
               "volatile unsigned long input = %dUL;" % r.randint(1, 1000),
               "#define NOINL __attribute__((noinline))", "",
               "NOINL unsigned long leaf(unsigned long a, unsigned long b) { return a * 3UL + (b ^ 0x5aUL); }",
               "NOINL unsigned long rec(unsigned long n) { return n == 0 ? 1UL : n + rec(n - 1); }"]
        for fi in range(self.nfuncs):
            out.append("NOINL unsigned long f%d(unsigned long a, unsigned long b);" % fi)
        # the pointer table: leaf and functions no earlier one can reach through it in a loop
        out.append("static unsigned long p0(unsigned long a, unsigned long b) { return a - b; }")
        out.append("static unsigned long p1(unsigned long a, unsigned long b) { return (a << 1) | (b & 1UL); }")
        out.append("unsigned long (*volatile fp[4])(unsigned long, unsigned long) = {leaf, p0, p1, leaf};")
        for fi in range(self.nfuncs):
            names = ["a", "b", "x", "y"]
            out.append("NOINL unsigned long f%d(unsigned long a, unsigned long b)" % fi)
            out.append("{")
            out.append("    unsigned long x = a + %dUL, y = b ^ %dUL;" % (r.randint(0, 9), r.randint(0, 9)))
            out += self.block(fi, names, 0, 1, False)
            out.append("    return x + y * 3UL + a - b;")
            out.append("}")
        # the driver: every function, the pointer table and the recursion, many times over
        out += ["NOINL unsigned long run(unsigned long n)", "{",
                "    unsigned long acc = input;",
                "    for (unsigned long k = 0; k < n; k++) {",
                "        acc += f0(acc, k);",
                "        acc ^= fp[(acc >> 3) & 3UL](acc, k);",
                "        acc += rec(k & 7UL);"]
        for fi in range(1, self.nfuncs):
            if r.random() < 0.6:
                out.append("        acc %s f%d(k, acc);" % (r.choice(["+=", "^=", "-="]), fi))
        out += ["    }", "    return acc;", "}"]
        out += ["NOINL void trace_begin(void) { __asm__ volatile(\"\" ::: \"memory\"); }",
                "NOINL void trace_end(void) { __asm__ volatile(\"\" ::: \"memory\"); }",
                "",
                "int main(void)",
                "{",
                "    unsigned long w = run(2UL);",
                "    trace_begin();",
                "    unsigned long v = run(%dUL);" % r.randint(10, 30),
                "    trace_end();",
                "    printf(\"result=%lu\\n\", v + w);",
                "    return 0;",
                "}", ""]
        return "\n".join(out)


def generate(seed):
    return _Gen(seed).source()


if __name__ == "__main__":
    import sys
    print(generate(int(sys.argv[1]) if len(sys.argv) > 1 else 1))
