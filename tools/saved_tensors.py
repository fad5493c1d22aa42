#!/usr/bin/env python3
"""saved_tensors.py: what PyTorch keeps for backward, counted independently of ampscope.

Rebuilds a case's model in PyTorch from `ampscope check --json CASE` (optionally with
--set overrides already applied), runs one forward pass and the loss under CPU autocast,
and counts, with torch.autograd.graph.saved_tensors_hooks, the bytes of the distinct
storages saved for backward, leaving out parameters and autocast's copies of them (the
harness counts those as params and autocast_cache). Prints one CSV row:
    case,autocast,batch,saved_bytes,torch_version
and, on stderr, every saved storage.

Usage: bin/ampscope check --json CASE [--set ...] | python3 tools/saved_tensors.py
CPU autocast runs bfloat16 on every PyTorch version; float16 needs PyTorch 2.x.
"""
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


def build(cfg):
    """The case's model as tools/torch_reference.py builds it (a graph of the case's layers)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_reference import build_model
    return build_model(cfg)


DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def main():
    cfg = json.load(sys.stdin)
    model = build(cfg).to(DTYPES[cfg["precision"]["params"]])
    params = {p.data_ptr() for p in model.parameters()}
    data = cfg["data"]
    if data["input_dtype"] == "int64":  # token ids (what they are does not change the bytes)
        x = torch.randint(0, cfg["model"][0]["in"], (data["batch"], *data["shape"]))
    else:
        x = torch.randn(data["batch"], *data["shape"]).to(DTYPES[data["input_dtype"]])
    ac = cfg["precision"]["autocast"]
    saved = {}

    def is_param_or_copy(t):
        base = t._base if t._base is not None else t
        if base.data_ptr() in params:
            return True
        fn = base.grad_fn
        return (fn is not None and type(fn).__name__ == "ToCopyBackward0"
                and type(fn.next_functions[0][0]).__name__ == "AccumulateGrad")

    def pack(t):
        if not is_param_or_copy(t):
            s = t.untyped_storage()
            saved[s.data_ptr()] = (s.nbytes(), str(t.dtype), tuple(t.shape))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast("cpu", dtype=DTYPES[ac], enabled=ac != "off"):
            out = model(x)
            loss_in = cfg["precision"]["loss_in_autocast"]
            if not loss_in:
                pass
        with torch.autocast("cpu", dtype=DTYPES[ac], enabled=ac != "off" and loss_in):
            if cfg["train"]["loss"] == "cross_entropy":
                target = torch.randint(0, out.shape[-1], out.shape[:-1])
                loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))
            else:
                target = torch.randn_like(out)
                red = cfg["train"].get("reduction", "mean")
                loss = F.mse_loss(out, target, reduction=red)
                if red == "none":
                    loss = loss.mean()
    total = sum(v[0] for v in saved.values())
    for ptr, (n, dt, shape) in saved.items():
        print("saved %s %s %d bytes" % (dt, shape, n), file=sys.stderr)
    print("%s,%s,%d,%d,%s" % (cfg["name"], ac, data["batch"], total, torch.__version__))


if __name__ == "__main__":
    main()
