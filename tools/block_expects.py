#!/usr/bin/env python3
"""block_expects.py: the `[expect] dtype` lines of a block case, from block_dtypes.py's CSV.

A block case (cases/{llama,vit,unet}-block-*.case) tags each [model] line that is
one of PyTorch's tensors with a comment `# ref: NAME`, NAME the tensor's name in
tests/references/blocks/<block>-<config>.csv (its `name` column). This prints
`dtype LAYER.out = DTYPE` for every tagged line, the dtype from the CSV; with --check it
instead compares the case's own `dtype LAYER.out = ...` lines with the CSV and exits 1
naming each that differs (or whose tag names no row).

Usage: /opt/torch-venv/bin/python tools/block_expects.py CASE CSV [--check]
"""
import argparse
import csv
import re
import sys

TAG = re.compile(r"^\s*([A-Za-z_][\w]*)\s*=.*#\s*ref:\s*([\w.]+)")
KIND = re.compile(r"^\s*[A-Za-z_]\w*\s*=\s*(\w+)")
EXPECT = re.compile(r"^\s*dtype\s+([\w.@]+)\.out\s*=\s*(\w+)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("case")
    ap.add_argument("csv")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    with open(a.csv) as f:
        dtypes = {r["name"]: r["dtype"] for r in csv.DictReader(f)}
    tags, kinds, expects, section = {}, {}, {}, None
    with open(a.case) as f:
        for n, line in enumerate(f, 1):
            s = line.strip()
            if s.startswith("["):
                section = s
            elif section == "[model]" and (m := TAG.match(line)):
                if m.group(2) not in dtypes:
                    sys.exit(f"{a.case}:{n}: ref {m.group(2)} is no tensor of {a.csv}")
                tags[m.group(1)] = dtypes[m.group(2)]
                kinds[m.group(1)] = KIND.match(line).group(1)
            elif section == "[expect]" and (m := EXPECT.match(line)):
                expects[m.group(1)] = (n, m.group(2))
    if not a.check:
        for layer, dt in tags.items():
            print(f"dtype {layer}.out = {dt}")
        return
    bad = 0
    for layer, (n, dt) in expects.items():
        if layer in tags and tags[layer] != dt:
            print(f"{a.case}:{n}: {layer}.out is {dt} here, {tags[layer]} in {a.csv}")
            bad += 1
    # a tagged line with no dtype line is only a `to` of the dtype its input has: PyTorch
    # returns the input itself, and the harness makes no tensor of its own for it
    for layer in tags:
        if layer not in expects and kinds[layer] != "to":
            print(f"{a.case}: {layer} is tagged but has no dtype line")
            bad += 1
    print(f"{a.case}: {len(expects)} dtype lines of outputs, "
          f"{sum(1 for x in expects if x in tags)} checked against {a.csv}, {bad} differ")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
