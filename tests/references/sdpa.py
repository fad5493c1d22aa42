"""Writes tests/references/sdpa.csv: F.scaled_dot_product_attention forced to
SDPBackend.MATH (PyTorch on the CPU otherwise runs a flash kernel of its own), forward and
backward for a few shapes, dtypes and options, and what autograd saves for backward
(saved_tensors_hooks). Rows: config, dtype, b, h, l, s, e, ev, causal, scale ("" for the
default 1/sqrt(e)), hkv (the heads of k and v: fewer than h with enable_gqa=True), mask (the
additive float attn_mask's shape, "2x1x4x6", or ""), tensor, index, value. tensor is q, k,
v, mask, dout (the upstream gradient: the loss is sum(out * dout)), out, probs (the math
path's second result, its softmax), dq, dk, dv, dmask (values as float.hex), or saved
(index k, value "dtype dims" of the k-th saved tensor, shared storages once, the inputs
themselves marked "input").
Run: /opt/torch-venv/bin/python tests/references/sdpa.py
"""
import csv
import os

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

DT = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
CONFIGS = [  # name, dtype, b, h, l, s, e, ev, causal, scale[, hkv, mask shape]
    ("f32", "float32", 2, 3, 5, 5, 4, 4, False, None),
    ("f32-causal-scale", "float32", 1, 2, 4, 4, 8, 8, True, 0.3),
    ("f32-causal-wide", "float32", 1, 2, 3, 6, 4, 2, True, None),
    ("f16-causal", "float16", 2, 2, 5, 5, 4, 4, True, None),
    ("bf16", "bfloat16", 1, 3, 4, 4, 8, 8, False, None),
    # float32 q, k, v under CUDA autocast float16 (lower_precision_fp: cast to float16 first;
    # written as that policy does, with explicit casts: the gradients come back float32)
    ("autocast-f16-causal", "float32", 1, 2, 4, 4, 4, 4, True, None),
    # grouped-query attention (enable_gqa=True): k and v with fewer heads
    ("gqa-f32", "float32", 2, 4, 5, 5, 4, 4, False, None, 2, None),
    ("gqa-f16-causal", "float16", 1, 8, 4, 4, 8, 8, True, None, 2, None),
    # an additive float mask, broadcast over heads or not, with and without gqa; under
    # autocast the float32 mask is cast to float16 with q, k, v (cached_cast of attn_mask)
    ("mask-f32", "float32", 2, 2, 4, 6, 4, 4, False, None, 2, (2, 1, 4, 6)),
    ("mask-gqa-bf16", "bfloat16", 1, 4, 3, 5, 8, 8, False, 0.4, 1, (1, 4, 3, 5)),
    ("autocast-f16-mask-gqa", "float32", 1, 4, 4, 4, 4, 4, False, None, 2, (1, 1, 1, 4)),
]


def main():
    out_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sdpa.csv")
    g = torch.Generator().manual_seed(21)
    with open(out_path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["config", "dtype", "b", "h", "l", "s", "e", "ev", "causal", "scale",
                    "hkv", "mask", "tensor", "index", "value"])
        for cfg in CONFIGS:
            name, dn, b, h, l, s, e, ev, causal, scale = cfg[:10]
            hkv, mshape = cfg[10:] if len(cfg) > 10 else (h, None)
            dt = DT[dn]
            q = torch.randn(b, h, l, e, generator=g).to(dt).requires_grad_(True)
            k = torch.randn(b, hkv, s, e, generator=g).to(dt).requires_grad_(True)
            v = torch.randn(b, hkv, s, ev, generator=g).to(dt).requires_grad_(True)
            dout = torch.randn(b, h, l, ev, generator=g).to(dt)
            mask = None
            if mshape:  # a few keys hidden (-inf), as a padding mask hides them
                mask = torch.randn(*mshape, generator=g)
                mask.view(-1)[3::4] = float("-inf")
                mask = mask.to(dt).requires_grad_(True)
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
                ma = mask.half() if autocast and mask is not None else mask
                out = F.scaled_dot_product_attention(qa, ka, va, attn_mask=ma, is_causal=causal,
                                                     scale=scale, enable_gqa=hkv != h)
            out.backward(dout)
            probs = held["probs"]
            assert out.dtype == (torch.float16 if autocast else dt)
            assert probs.dtype == torch.float32
            head = [name, dn, b, h, l, s, e, ev, int(causal), "" if scale is None else scale,
                    hkv, "x".join(str(d) for d in mshape) if mshape else ""]
            tensors = [("q", q), ("k", k), ("v", v), ("dout", dout), ("out", out),
                       ("probs", probs), ("dq", q.grad), ("dk", k.grad), ("dv", v.grad)]
            if mask is not None:
                tensors += [("mask", mask), ("dmask", mask.grad)]
            for tname, t in tensors:
                flat = t.detach().flatten()
                for i in range(flat.numel()):
                    w.writerow(head + [tname, i, float(flat[i]).hex()])
            for i, sv in enumerate(saved):
                w.writerow(head + ["saved", i, sv])
            print(name, "saved:", saved)
    print("torch", torch.__version__, "wrote", out_path)


if __name__ == "__main__":
    main()
