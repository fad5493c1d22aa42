#!/usr/bin/env python3
"""diff_results.py: are two results folders the same run?

Usage: tools/diff_results.py [--common-columns] OLD NEW [CASE...]

For every case folder in OLD (or the CASEs named), compares NEW's tensors.csv, hist.csv,
memory.csv and steps.csv with OLD's, byte for byte, except steps.csv's step_ms column (a
timing). A refactoring that changes no behaviour leaves them identical on the same machine
(the GEMM kernels OpenBLAS picks, and so the float32 summation order, depend on the CPU).
Prints one line per case and per differing file (with the first differing line), and
exits 1 when anything differs or is missing, 0 when all are identical.

--common-columns compares only the columns both files have (by name, in OLD's order), so
NEW may append columns (results/README.md lists those appended since) and still be the
same run; without it a file with another set of columns differs.
"""
import csv
import os
import sys

FILES = ("tensors.csv", "hist.csv", "memory.csv", "steps.csv")
TIMINGS = {"steps.csv": ("step_ms",)}


def read(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


def rows(table, drop, only=None):
    """table's columns not in drop (and, when only is given, in it), in only's order"""
    if not table:
        return table
    names = table[0]
    order = [n for n in (only if only is not None else names) if n not in drop]
    keep = [names.index(n) for n in order]
    return [[r[i] if i < len(r) else "" for i in keep] for r in table]


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i + 1, ",".join(x), ",".join(y)
    n = min(len(a), len(b)) + 1
    return n, ",".join(a[n - 1]) if len(a) >= n else "<end>", ",".join(b[n - 1]) if len(b) >= n else "<end>"


def main(argv):
    common = "--common-columns" in argv[1:]
    argv = [a for a in argv if a != "--common-columns"]
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    old, new, names = argv[1], argv[2], argv[3:]
    if not names:
        names = sorted(d for d in os.listdir(old)
                       if os.path.isfile(os.path.join(old, d, "tensors.csv")))
    if not names:
        print(f"diff_results: no case folder (with tensors.csv) in {old}")
        return 2
    bad = 0
    for name in names:
        problems = []
        for fname in FILES:
            a_path, b_path = os.path.join(old, name, fname), os.path.join(new, name, fname)
            if not os.path.exists(a_path):
                continue
            if not os.path.exists(b_path):
                problems.append(f"  {fname}: missing in {new}")
                continue
            drop = TIMINGS.get(fname, ())
            ta, tb = read(a_path), read(b_path)
            only = None
            if common and ta and tb:
                only = [n for n in ta[0] if n in tb[0]]
            a, b = rows(ta, drop, only), rows(tb, drop, only)
            if a != b:
                line, x, y = first_difference(a, b)
                problems.append(f"  {fname}: differs from line {line}:\n    - {x}\n    + {y}")
        print(f"{'same  ' if not problems else 'DIFFER'} {name}")
        for p in problems:
            print(p)
        bad += bool(problems)
    print(f"diff_results: {len(names) - bad} of {len(names)} cases identical")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
