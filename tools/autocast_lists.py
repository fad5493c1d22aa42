#!/usr/bin/env python3
"""autocast_lists.py: CUDA autocast's op lists, as the installed PyTorch declares them.

Usage: /opt/torch-venv/bin/python tools/autocast_lists.py > tests/references/autocast_lists.csv

Reads ATen/autocast_mode.h from torch's include folder: the lists autocast_mode.cpp
registers for CUDA (TORCH_LIBRARY_IMPL(aten, AutocastCUDA, m)), AT_FORALL_LOWER_PRECISION_FP,
AT_FORALL_FP32, AT_FORALL_FP32_SET_OPT_DTYPE, AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE (whose
entries end with their policy, fp32_append_dtype) and AT_FORALL_PROMOTE, and prints
`op,list` once per ATen op name (overloads folded: `pow` for pow.Tensor_Scalar and the
others). tests/test_dtype_reason.c holds the dtype reasons the harness records against it.
"""
import os
import re
import sys

import torch.utils.cpp_extension

LISTS = {
    "AT_FORALL_LOWER_PRECISION_FP": "lower_precision_fp",
    "AT_FORALL_FP32": "fp32",
    "AT_FORALL_FP32_SET_OPT_DTYPE": "fp32_set_opt_dtype",
    "AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE": "fp32_append_dtype",
    "AT_FORALL_PROMOTE": "promote",
}


def header():
    for d in torch.utils.cpp_extension.include_paths():
        path = os.path.join(d, "ATen", "autocast_mode.h")
        if os.path.isfile(path):
            return path
    sys.exit("autocast_lists.py: no ATen/autocast_mode.h in torch's include paths")


def main():
    text = open(header()).read()
    rows = []
    for macro, name in LISTS.items():
        m = re.search(r"#define %s\(_\)(.*?)(?:\n\s*\n|#define|#else)" % macro, text, re.S)
        if not m:
            sys.exit("autocast_lists.py: %s not found" % macro)
        for op in re.findall(r"_\(\s*(?:ADD_NS\()?(\w+)", m.group(1)):
            if (op, name) not in rows:
                rows.append((op, name))
    print("op,list")
    for op, name in rows:
        print("%s,%s" % (op, name))


if __name__ == "__main__":
    main()
