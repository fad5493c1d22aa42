#!/usr/bin/env python3
"""compare_reference.py: is a results folder the run docs/reference-run/ holds?

Usage: tools/compare_reference.py [--ran CASE_FILE...] REF NEW
       tools/compare_reference.py --self-check REF

What a run is made of, whatever the CPU, must agree, else the exit status is 1 and each
difference is named: every folder of REF (a case, a sweep's, a matrix's) is in NEW with the
same .csv and .md files and the same columns; row by row, tensors.csv's tensors (step, pass,
order, name, role, dtype, shape, numel, bytes), fp8.csv's quantizations (step, tensor,
format), the matrix's errors.csv (config, tensor, dtype, numel), the sweep's and the matrix's
variants (with their status and dtypes), steps.csv's steps, memory.csv's categories and
config.csv whole but the CPU's GEMM counts by path (gemm_sgemm, gemm_bf16); summary.csv's row of each REF case (status and dtypes). Every case named by
--ran (the case files the run ran) must be in REF: a case added since REF was made.

Values and counts (zeros, underflow, amax, histograms, losses, bytes at peak, report.md's
numbers) follow from float32 sums whose order depends on the GEMM kernels OpenBLAS picks for
the CPU: they are counted per file and printed, never a failure. Timings (*_ms columns) are
left out. Folders of NEW that REF lacks and no --ran case names (an earlier run's) are
named in one line and otherwise ignored.

--self-check REF: REF alone is a whole run: REPORT.md and summary.csv at the top, every case
folder with its tensors.csv, steps.csv and report.md, and a folder for each case of
summary.csv. Exit 1 naming what is missing.

Exit 0 when the structure agrees, 1 when it does not, 2 on bad usage.
"""
import csv
import os
import re
import sys

# per CSV file: the columns that say what was run (compared row by row; a difference fails);
# None: no row structure (hist.csv's bins are those the values reach)
STRUCTURE = {
    "tensors.csv": ("case", "step", "pass", "order", "tensor", "role", "dtype", "shape", "numel",
                    "bytes"),
    "fp8.csv": ("case", "step", "tensor", "format"),
    "errors.csv": ("case", "config", "tensor", "dtype", "numel"),
    "matrix.csv": ("case", "config", "variant", "status", "output_dtype", "loss_dtype",
                   "param_grad_dtypes"),
    "sweep.csv": ("case", "variant", "settings", "status"),
    "steps.csv": ("case", "step"),
    "memory.csv": ("case", "category"),
    "hist.csv": None,
}
# summary.csv: one row per case, found by its name (NEW may hold other runs' rows too)
SUMMARY_STRUCTURE = ("status", "params", "autocast", "input_dtype", "output_dtype", "loss_dtype",
                     "param_grad_dtypes", "cast_grad_dtypes", "activation_grad_dtypes")
HIST_KEY = ("case", "step", "pass", "tensor", "bin")
# config.csv's columns that depend on the processor and the build (the CPU's GEMMs by path:
# bfloat16 instructions where the processor has them), left out of the comparison
MACHINE_CONFIG = ("gemm_sgemm", "gemm_bf16")


def without_machine_columns(table):
    keep = [i for i, c in enumerate(table[0]) if c not in MACHINE_CONFIG] if table else []
    return [[r[i] for i in keep if i < len(r)] for r in table]
CASE_FILES = ("tensors.csv", "steps.csv", "report.md")


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


def is_timing(column):
    return column.endswith("_ms")


def case_name(path):
    """the [case] name of a case file, else its file name without .case"""
    section = None
    if not os.path.exists(path):
        return os.path.splitext(os.path.basename(path))[0]
    with open(path, errors="replace") as f:
        for line in f:
            line = line.strip()
            m = re.match(r"^\[(\w+)\]$", line)
            if m:
                section = m.group(1)
            elif section == "case":
                m = re.match(r"^name\s*=\s*(\S+)", line)
                if m:
                    return m.group(1)
    return os.path.splitext(os.path.basename(path))[0]


class Tally:
    """structural differences (failures) and value differences (counts, per file name)"""

    def __init__(self):
        self.failures = []
        self.values = {}  # file name -> [cells or lines that differ, folders where they do]

    def fail(self, where, what):
        self.failures.append(f"{where}: {what}")

    def differ(self, fname, n):
        if n:
            v = self.values.setdefault(fname, [0, 0])
            v[0] += n
            v[1] += 1


def compare_rows(where, fname, a, b, tally):
    """two CSV tables (header first) of one file: columns, structure, then values"""
    if fname == "config.csv":
        a, b = without_machine_columns(a), without_machine_columns(b)
    if not a or not b:
        if bool(a) != bool(b):
            tally.fail(where, "empty in one run only")
        return
    if a[0] != b[0]:
        tally.fail(where, f"other columns: {','.join(a[0])} vs {','.join(b[0])}")
        return
    head = a[0]
    if fname == "config.csv":  # the case as configured: all of it
        key = [i for i, c in enumerate(head)]
    elif STRUCTURE.get(fname, ()) is None:
        key = None
    else:
        key = [head.index(c) for c in STRUCTURE.get(fname, ()) if c in head]
    values = [i for i, c in enumerate(head) if not is_timing(c) and (key is None or i not in key)]
    if key is None:  # hist.csv: counts by (tensor, bin), the bins those the values reach
        k = [head.index(c) for c in HIST_KEY if c in head]
        da = {tuple(r[i] for i in k): r for r in a[1:]}
        db = {tuple(r[i] for i in k): r for r in b[1:]}
        n = sum(1 for x in set(da) | set(db) if da.get(x) != db.get(x))
        tally.differ(fname, n)
        return
    if len(a) != len(b):
        tally.fail(where, f"{len(a) - 1} rows in the reference, {len(b) - 1} here")
    for line, (ra, rb) in enumerate(zip(a[1:], b[1:]), start=2):
        ka, kb = [ra[i] if i < len(ra) else "" for i in key], [rb[i] if i < len(rb) else "" for i in key]
        if ka != kb:
            tally.fail(where, f"line {line}: {','.join(ka)} in the reference, {','.join(kb)} here")
            return
    tally.differ(fname, sum(1 for ra, rb in zip(a[1:], b[1:]) for i in values
                            if (ra[i] if i < len(ra) else "") != (rb[i] if i < len(rb) else "")))


def compare_summary(ref, new, cases, tally):
    a, b = read_csv(os.path.join(ref, "summary.csv")), os.path.join(new, "summary.csv")
    if not os.path.exists(b):
        tally.fail("summary.csv", "missing here")
        return
    b = read_csv(b)
    if not a or not b or "case" not in a[0] or "case" not in b[0]:
        tally.fail("summary.csv", "no case column")
        return
    rows_b = {r[b[0].index("case")]: r for r in b[1:]}
    cols = [c for c in a[0] if c in b[0] and c != "case" and not is_timing(c)]
    for c in SUMMARY_STRUCTURE:
        if c in a[0] and c not in b[0]:
            tally.fail("summary.csv", f"no column {c} here")
    n = 0
    for ra in a[1:]:
        name = ra[a[0].index("case")]
        if name not in cases:
            continue
        rb = rows_b.get(name)
        if rb is None:
            tally.fail("summary.csv", f"no row for {name} here")
            continue
        for c in cols:
            x, y = ra[a[0].index(c)], rb[b[0].index(c)]
            if x != y and c in SUMMARY_STRUCTURE:
                tally.fail("summary.csv", f"{name}'s {c}: {x} in the reference, {y} here")
            n += x != y and c not in SUMMARY_STRUCTURE
    tally.differ("summary.csv", n)


def compare_text(fname, a_path, b_path, tally):
    with open(a_path, errors="replace") as f:
        a = f.read().splitlines()
    with open(b_path, errors="replace") as f:
        b = f.read().splitlines()
    tally.differ(fname, sum(1 for x, y in zip(a, b) if x != y) + abs(len(a) - len(b)))


def compared_files(folder):
    return sorted(f for f in os.listdir(folder) if f.endswith((".csv", ".md")))


def folders(path):
    return sorted(d for d in os.listdir(path) if os.path.isdir(os.path.join(path, d)))


def compare(ref, new, ran):
    tally = Tally()
    ref_dirs, new_dirs = folders(ref), set(folders(new)) if os.path.isdir(new) else set()
    for name in ran:
        if name not in ref_dirs:
            tally.fail(name, "ran here, not in the reference (a case added since it was made)")
    for d in ref_dirs:
        if d not in new_dirs:
            tally.fail(d, "in the reference, not here")
            continue
        a_files, b_files = compared_files(os.path.join(ref, d)), compared_files(os.path.join(new, d))
        for f in sorted(set(a_files) ^ set(b_files)):
            tally.fail(f"{d}/{f}", "in the reference only" if f in a_files else "here only")
        for f in sorted(set(a_files) & set(b_files)):
            a_path, b_path = os.path.join(ref, d, f), os.path.join(new, d, f)
            if f.endswith(".md"):
                compare_text(f, a_path, b_path, tally)
            else:
                compare_rows(f"{d}/{f}", f, read_csv(a_path), read_csv(b_path), tally)
    compare_summary(ref, new, set(ref_dirs) & new_dirs, tally)
    if os.path.exists(os.path.join(new, "REPORT.md")):
        compare_text("REPORT.md", os.path.join(ref, "REPORT.md"), os.path.join(new, "REPORT.md"),
                     tally)
    else:
        tally.fail("REPORT.md", "missing here")
    others = sorted(new_dirs - set(ref_dirs) - set(ran))
    return tally, len(ref_dirs), others


def self_check(ref):
    missing = [f for f in ("REPORT.md", "summary.csv") if not os.path.exists(os.path.join(ref, f))]
    dirs = folders(ref)
    cases = [d for d in dirs if not d.endswith((".sweep", ".matrix"))]
    for d in cases:
        missing += [f"{d}/{f}" for f in CASE_FILES if not os.path.exists(os.path.join(ref, d, f))]
    for d in dirs:
        if d.endswith(".sweep") or d.endswith(".matrix"):
            table = "sweep.csv" if d.endswith(".sweep") else "matrix.csv"
            missing += [f"{d}/{f}" for f in (table, "report.md")
                        if not os.path.exists(os.path.join(ref, d, f))]
    if os.path.exists(os.path.join(ref, "summary.csv")):
        s = read_csv(os.path.join(ref, "summary.csv"))
        names = [r[s[0].index("case")] for r in s[1:]] if s and "case" in s[0] else []
        missing += [f"{n}/ (summary.csv's case)" for n in names if n not in cases]
        missing += [f"{d} in summary.csv" for d in cases if d not in names]
    for m in missing:
        print(f"reference: {ref}: missing {m}")
    if not missing:
        print(f"reference: {ref}: {len(cases)} case folders, each with "
              f"{', '.join(CASE_FILES)}; REPORT.md and summary.csv")
    return 1 if missing else 0


def main(argv):
    args, ran = [], []
    it = iter(argv[1:])
    check = False
    for a in it:
        if a == "--ran":
            continue
        if a == "--self-check":
            check = True
        elif a.endswith(".case"):
            ran.append(case_name(a))
        else:
            args.append(a)
    if check and len(args) == 1:
        return self_check(args[0])
    if check or len(args) != 2 or not os.path.isdir(args[0]):
        sys.stderr.write(__doc__)
        return 2
    ref, new = args
    tally, n, others = compare(ref, new, ran)
    for f in tally.failures:
        print(f"reference: DIFFERS {f}")
    if others:
        print(f"reference: {len(others)} folder(s) of {new} not in the reference nor in this "
              f"run, not compared: {', '.join(others[:5])}{', ...' if len(others) > 5 else ''}")
    values = ", ".join(f"{f} {v[0]} in {v[1]} folder{'s' if v[1] > 1 else ''}"
                       for f, v in sorted(tally.values.items()))
    if tally.failures:
        print(f"reference: {new} is not the run {ref} holds ({len(tally.failures)} "
              f"difference{'s' if len(tally.failures) > 1 else ''} above; values: "
              f"{values or 'the same'}); `make reference-run` makes it again ({ref}/README.md)")
        return 1
    print(f"reference: {n} folders of {new} have the cases, tensors, dtypes and shapes of {ref}; "
          + (f"values that depend on this CPU's float32 sums differ (not a failure): {values}"
             if values else "every value the same"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
