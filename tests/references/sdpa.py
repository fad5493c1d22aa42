"""Writes tests/references/sdpa.csv: F.scaled_dot_product_attention forced to
SDPBackend.MATH (PyTorch on the CPU otherwise runs a flash kernel of its own), forward and
backward for a few shapes, dtypes and options, and what autograd saves for backward
(saved_tensors_hooks). Rows: config, dtype, b, h, l, s, e, ev, causal, scale ("" for the
default 1/sqrt(e)), tensor, index, value. tensor is q, k, v, dout (the upstream gradient:
the loss is sum(out * dout)), out, probs (the math path's second result, its softmax),
dq, dk, dv (values as float.hex), or saved (index k, value "dtype dims" of the k-th saved
tensor, shared storages once, the inputs themselves marked "input").
Run: /opt/torch-venv/bin/python tests/references/sdpa.py
"""
import csv
import os

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

DT = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
CONFIGS = [  # name, dtype, b, h, l, s, e, ev, causal, scale
    ("f32", "float32", 2, 3, 5, 5, 4, 4, False, None),
    ("f32-causal-scale", "float32", 1, 2, 4, 4, 8, 8, True, 0.3),
    ("f32-causal-wide", "float32", 1, 2, 3, 6, 4, 2, True, None),
    ("f16-causal", "float16", 2, 2, 5, 5, 4, 4, True, None),
    ("bf16", "bfloat16", 1, 3, 4, 4, 8, 8, False, None),
    # float32 q, k, v under CUDA autocast float16 (lower_precision_fp: cast to float16 first;
    # written as that policy does, with explicit casts: the gradients come back float32)
    ("autocast-f16-causal", "float32", 1, 2, 4, 4, 4, 4, True, None),
]


def main():
    out_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sdpa.csv")
    g = torch.Generator().manual_seed(21)
    with open(out_path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["config", "dtype", "b", "h", "l", "s", "e", "ev", "causal", "scale",
                    "tensor", "index", "value"])
        for name, dn, b, h, l, s, e, ev, causal, scale in CONFIGS:
            dt = DT[dn]
            q = torch.randn(b, h, l, e, generator=g).to(dt).requires_grad_(True)
            k = torch.randn(b, h, s, e, generator=g).to(dt).requires_grad_(True)
            v = torch.randn(b, h, s, ev, generator=g).to(dt).requires_grad_(True)
            dout = torch.randn(b, h, l, ev, generator=g).to(dt)
            saved, ptrs, held = [], set(), {}
            inputs = {q.data_ptr(), k.data_ptr(), v.data_ptr()}

            def pack(t):
                if tuple(t.shape) == (b, h, l, s):
                    held["probs"] = t
                p = t.untyped_storage().data_ptr()
                if p not in ptrs:
                    ptrs.add(p)
                    base = torch.empty(0, dtype=t.dtype).new_empty(
                        t.untyped_storage().nbytes() // t.element_size(), dtype=t.dtype)
                    saved.append("%s %s%s" % (str(t.dtype).replace("torch.", ""),
                                              "x".join(str(d) for d in base.shape),
                                              " input" if p in inputs else ""))
                return t

            autocast = name.startswith("autocast-")
            with sdpa_kernel(SDPBackend.MATH), torch.autograd.graph.saved_tensors_hooks(
                    pack, lambda t: t):
                qa, ka, va = (t.half() for t in (q, k, v)) if autocast else (q, k, v)
                out = F.scaled_dot_product_attention(qa, ka, va, is_causal=causal, scale=scale)
            out.backward(dout)
            probs = held["probs"]
            assert out.dtype == (torch.float16 if autocast else dt)
            assert probs.dtype == torch.float32
            head = [name, dn, b, h, l, s, e, ev, int(causal), "" if scale is None else scale]
            for tname, t in (("q", q), ("k", k), ("v", v), ("dout", dout), ("out", out),
                             ("probs", probs), ("dq", q.grad), ("dk", k.grad),
                             ("dv", v.grad)):
                flat = t.detach().flatten()
                for i in range(flat.numel()):
                    w.writerow(head + [tname, i, float(flat[i]).hex()])
            for i, sv in enumerate(saved):
                w.writerow(head + ["saved", i, sv])
            print(name, "saved:", saved)
    print("torch", torch.__version__, "wrote", out_path)


if __name__ == "__main__":
    main()
