#!/usr/bin/env python3
"""saved_bytes.py: what PyTorch keeps for backward in the normalization and pooling cases,
counted independently of ampscope, for tests/test_norm.c.

Rebuilds each case's model from `ampscope check --json CASE --set precision.autocast=off`
(float32: CPU autocast's lists differ from CUDA's for layer_norm and group_norm), runs one
forward pass and the loss, and counts with torch.autograd.graph.saved_tensors_hooks the
bytes of the distinct storages saved for backward, parameters and buffers (batch_norm's
running stats) left out, as tools/saved_tensors.py does for the other kinds. Writes
tests/references/norm/saved_bytes.csv: case,sets,saved_bytes,torch_version.

Run from the repository root, after make:
    /opt/torch-venv/bin/python tests/references/norm/saved_bytes.py
"""
import json
import os
import subprocess

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = ["tests/cases/small-layer-norm.case", "tests/cases/small-group-norm.case",
         "tests/cases/small-batch-norm.case", "tests/cases/small-resnet-head.case"]
SETS = ["precision.autocast=off"]


def stride_of(l):
    return l["stride"] if l["stride"] else l["kernel"]


def build(cfg):
    layers = []
    for l in cfg["model"]:
        k = l["kind"]
        if k == "linear":
            layers.append(nn.Linear(l["in"], l["out"], bias=l["bias"]))
        elif k == "conv2d":
            layers.append(nn.Conv2d(l["in"], l["out"], l["kernel"], stride=l["stride"],
                                    padding=l["padding"], dilation=l["dilation"], bias=l["bias"]))
        elif k == "relu":
            layers.append(nn.ReLU())
        elif k == "flatten":
            layers.append(nn.Flatten())
        elif k == "layer_norm":
            layers.append(nn.LayerNorm(l["normalized_shape"], eps=l["eps"],
                                       elementwise_affine=l["elementwise_affine"], bias=l["bias"]))
        elif k == "group_norm":
            layers.append(nn.GroupNorm(l["num_groups"], l["num_channels"], eps=l["eps"],
                                       affine=l["affine"]))
        elif k == "batch_norm2d":
            layers.append(nn.BatchNorm2d(l["num_features"], eps=l["eps"], momentum=l["momentum"],
                                         affine=l["affine"]))
        elif k == "max_pool2d":
            layers.append(nn.MaxPool2d(l["kernel"], stride_of(l), l["padding"]))
        elif k == "avg_pool2d":
            layers.append(nn.AvgPool2d(l["kernel"], stride_of(l), l["padding"],
                                       count_include_pad=l["count_include_pad"]))
        elif k == "adaptive_avg_pool2d":
            layers.append(nn.AdaptiveAvgPool2d(1))
        else:
            raise SystemExit("unknown layer kind %s" % k)
    return nn.Sequential(*layers)


def saved_bytes(cfg):
    model = build(cfg).train()
    own = {t.data_ptr() for t in list(model.parameters()) + list(model.buffers())}
    data = cfg["data"]
    x = torch.randn(data["batch"], *data["shape"])
    saved = {}

    def pack(t):
        base = t._base if t._base is not None else t
        if base.data_ptr() not in own and t.untyped_storage().nbytes():
            s = t.untyped_storage()
            saved[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(x)
        assert cfg["train"]["loss"] == "cross_entropy"
        F.cross_entropy(out, torch.randint(0, out.shape[-1], (data["batch"],)))
    return sum(saved.values())


def main():
    rows = ["case,sets,saved_bytes,torch_version"]
    for case in CASES:
        args = ["bin/ampscope", "check", "--json", case]
        for s in SETS:
            args += ["--set", s]
        cfg = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)
        rows.append("%s,%s,%d,%s" % (case, ";".join(SETS), saved_bytes(cfg), torch.__version__))
    with open(os.path.join(HERE, "saved_bytes.csv"), "w") as f:
        f.write("\n".join(rows) + "\n")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
