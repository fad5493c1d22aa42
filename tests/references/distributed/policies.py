"""The communication policies' arithmetic on stacked per-rank gradients, with PyTorch's own
functions where they can run without a process group, the rest reimplemented from their
source line by line (tests/test_distributed.c reads the output, policies.csv):
  ddp            reducer.cpp's mark_variable_ready_dense: at::mul_out(bucket, grad, 1/N)
                 (reimplemented: torch.mul(grad, 1 / N) in the gradient's dtype)
  fp16_compress  default_hooks.py's fp16_compress_hook: buffer.to(float16).div_(N), the
  bf16_compress  all-reduce, copy_ back (reimplemented: the hook calls dist.all_reduce)
  fsdp           DefaultState._get_gradient_predivide_factor and fsdp._runtime_utils's
                 _div_if_needed, called; the reduce-scatter a SUM
  fsdp2          _fsdp_collectives._get_gradient_divide_factors and its _div_if_needed, called
                 with a group that only answers size(); AVG as NCCL runs it for floats (PreMulSum by 1/N)
The SUM adds the ranks in order, rank 0 first: ((g0 + g1) + g2) + g3, each add a tensor
add in the wire dtype (rounded once, as c10::Half's operator+).
Usage: /opt/torch-venv/bin/python tests/references/distributed/policies.py > tests/references/distributed/policies.csv
"""
import struct

import numpy as np
import torch
from torch.distributed import ReduceOp
from torch.distributed.algorithms._comm_hooks.default_hooks import DefaultState
from torch.distributed.fsdp._fully_shard._fsdp_collectives import _div_if_needed as _div_if_needed2
from torch.distributed.fsdp._fully_shard._fsdp_collectives import _get_gradient_divide_factors
from torch.distributed.fsdp._runtime_utils import _div_if_needed

DT = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


class Group:
    def __init__(self, n):
        self.n = n

    def size(self):
        return self.n


def hexf(x):
    return "%08x" % struct.unpack("<I", struct.pack("<f", float(x)))[0]


def ssum(xs):
    acc = xs[0].clone()
    for x in xs[1:]:
        acc = acc + x
    return acc


def reduce(policy, rd, gd, grads):
    n = len(grads)
    if policy == "ddp":
        return ssum([torch.mul(g, 1 / n) for g in grads])
    if policy in ("fp16_compress", "bf16_compress"):
        wire = torch.float16 if policy == "fp16_compress" else torch.bfloat16
        return ssum([g.to(wire).div_(n) for g in grads]).to(gd)
    if policy == "fsdp":
        pre = DefaultState._get_gradient_predivide_factor(n)
        post = n / pre
        xs = [g.to(rd) for g in grads]
        for x in xs:
            _div_if_needed(x, pre)
        s = ssum(xs)
        _div_if_needed(s, post)
        return s.to(gd)
    if policy == "fsdp2":
        pre, post, op, _ = _get_gradient_divide_factors(Group(n), None, rd)
        xs = [g.to(rd) for g in grads]
        if op == ReduceOp.AVG:
            xs = [x * (1 / n) for x in xs]
        for x in xs:
            _div_if_needed2(x, pre)
        s = ssum(xs)
        _div_if_needed2(s, post)
        return s.to(gd)
    raise ValueError(policy)


def main():
    rng = np.random.default_rng(17)
    configs = [("ddp", "float32", "float32"), ("ddp", "float32", "float16"),
               ("ddp", "float32", "bfloat16"), ("fp16_compress", "float32", "float32"),
               ("bf16_compress", "float32", "float32"), ("fp16_compress", "float32", "float16"),
               ("fsdp", "float16", "float32"), ("fsdp", "bfloat16", "float32"),
               ("fsdp2", "float16", "float32"), ("fsdp2", "bfloat16", "float32"),
               ("fsdp2", "float32", "float32")]
    print("policy,reduce_dtype,grad_dtype,world_size,element," + ",".join(
        "rank%d" % k for k in range(8)) + ",result")
    for policy, rd, gd in configs:
        for n in (2, 4, 8):
            # every magnitude the policies can lose: ordinary, tiny (underflow when divided
            # first), huge (overflow when summed first), and half-ulp ties
            scales = [1.0, 1e-3, 3e-7, 6e-8, 2e4, 4e4, 1.0, 1.0]
            g = rng.standard_normal((n, len(scales))).astype(np.float32) * np.float32(scales)
            g[:, 6] = 1.0 if n == 2 else 2.0 ** -11
            g[0, 6] = 1.0
            grads = [torch.from_numpy(g[k].copy()).to(DT[gd]) for k in range(n)]
            # the inputs as given: .to(float16) of a float16 gradient is the gradient
            # itself, which the hook's div_ then divides in place
            given = [[hexf(x) for x in grad] for grad in grads]
            out = reduce(policy, DT[rd], DT[gd], grads)
            for e in range(len(scales)):
                ranks = [given[k][e] for k in range(n)] + [""] * (8 - n)
                print("%s,%s,%s,%d,%d,%s,%s" % (policy, rd, gd, n, e, ",".join(ranks),
                                               hexf(out[e])))


if __name__ == "__main__":
    main()
