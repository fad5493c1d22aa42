#!/usr/bin/env python3
"""shape_references.py: PyTorch's answers for the shape ops of harness/layers/shape.c.

Writes one CSV (tests/references/shape.csv, read by tests/test_shape.c) of rows
    kind,args,result
  - kind "slice": args "size start end step" (end "none" for None), result the positions
    torch.arange(size)[start:end:step] keeps, space-separated (aten::slice's clamping of
    start and end, negative ones counted from the end);
  - kind "cat", "stack": args "dtype_a dtype_b", result the dtype of torch.cat((a, b), -1)
    or torch.stack((a, b), 1) under CUDA autocast float16, asked of the dispatcher on fake CUDA tensors (as
    tools/autocast_policies.py does: no GPU needed);
  - kind "flatten": args "d1 d2 d3 start_dim end_dim" (a [2, d1, d2, d3] tensor), result the
    shape of torch.flatten(x, start_dim, end_dim), space-separated;
  - kind "squeeze", "unsqueeze": args "d1 d2 d3 dim" (d3 0: a [2, d1, d2] tensor), result
    the shape of x.squeeze(dim) or x.unsqueeze(dim).

Usage: /opt/torch-venv/bin/python tools/shape_references.py > tests/references/shape.csv
"""
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

DTYPES = ["float32", "float16", "bfloat16"]


def slices():
    for size in (1, 5, 16):
        for start in (0, 1, 3, -2, -7, 20):
            for end in (None, 0, 2, 8, -1, -3, -40, 100):
                for step in (1, 2, 3):
                    keep = torch.arange(size)[start:end:step]
                    if keep.numel() == 0:
                        continue  # the harness refuses an empty slice
                    args = f"{size} {start} {'none' if end is None else end} {step}"
                    yield "slice", args, " ".join(str(int(v)) for v in keep)


def cats():
    with FakeTensorMode():
        torch.set_autocast_enabled("cuda", True)
        torch.set_autocast_dtype("cuda", torch.float16)
        torch.autocast_increment_nesting()
        try:
            for a in DTYPES:
                for b in DTYPES:
                    x = torch.randn(2, 3, device="cuda").to(getattr(torch, a))
                    y = torch.randn(2, 5, device="cuda").to(getattr(torch, b))
                    out = torch.cat((x, y), -1).dtype
                    yield "cat", f"{a} {b}", str(out).replace("torch.", "")
                    out = torch.stack((x, y[:, :3]), 1).dtype
                    yield "stack", f"{a} {b}", str(out).replace("torch.", "")
        finally:
            torch.autocast_decrement_nesting()
            torch.set_autocast_enabled("cuda", False)


def views():
    shape = (3, 4, 5)
    x = torch.zeros(2, *shape)
    for s in range(-3, 4):
        for e in range(-3, 4):
            try:
                out = torch.flatten(x, s, e)
            except (RuntimeError, IndexError):
                continue
            if s % 4 == 0:
                continue  # the batch dim stays
            yield "flatten", f"{' '.join(map(str, shape))} {s} {e}", \
                " ".join(str(v) for v in out.shape[1:])
    for shp in ((3, 1, 5), (1, 4, 0), (3, 4, 1)):
        dims = tuple(d for d in shp if d)
        x = torch.zeros(2, *dims)
        for d in range(-len(dims), len(dims) + 1):
            if d % (len(dims) + 1) != 0:
                yield "squeeze", f"{' '.join(map(str, shp))} {d}", \
                    " ".join(str(v) for v in x.squeeze(d).shape[1:])
        if len(dims) < 3:
            for d in range(-len(dims) - 2, len(dims) + 2):
                if d % (len(dims) + 2) != 0:
                    yield "unsqueeze", f"{' '.join(map(str, shp))} {d}", \
                        " ".join(str(v) for v in x.unsqueeze(d).shape[1:])


def main():
    print("kind,args,result")
    for gen in (slices, cats, views):
        for row in gen():
            print(",".join(row))


if __name__ == "__main__":
    main()
