#!/usr/bin/env python3
"""import_reference.py: PyTorch's answers for a model that `ampscope import` imported, to
check the imported case against (tests/test_import.c).

    import_reference.py values SCRIPT.py [--params float32]  > values.csv
    import_reference.py dtypes SCRIPT.py --autocast float16  > dtypes.csv

values: the script's model() on its inputs() and target() in PyTorch on the CPU, the loss
as the harness computes LOSS (cross_entropy: F.cross_entropy(out.view(-1, V), y.view(-1)),
as the token cases; mse, l1, bce_with_logits: F.mse_loss, F.l1_loss,
F.binary_cross_entropy_with_logits, their mean), then backward: rows
`tensor,index,value` for `loss` and every element of every parameter's `.grad`, under the
parameter's state_dict name (a tied weight once); and in a column `float64` the same
computed by the model in float64 (PyTorch's own rounding noise in float32).

dtypes: the dtype CUDA autocast gives every node of the exported graph, without a GPU
(AMP_FACTS.md): torch.export.export of the model as the importer exports it, then its
graph module run node by node by a torch.fx.Interpreter on fake CUDA tensors
(FakeTensorMode; device=cpu arguments and factories made on the CPU moved to cuda) with
CUDA autocast switched on at the dispatcher; each call goes through
the AutocastCUDA kernels of aten/src/ATen/autocast_mode.cpp. Rows `node,dtype` for every
call_function node that returns one tensor (the imported case's `NODE.out`).
"""
import argparse
import importlib.util
import sys

import torch
import torch.nn.functional as F


def load(path):
    spec = importlib.util.spec_from_file_location("ampscope_reference_script", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def loss_of(name, out, target):
    if name == "cross_entropy":
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))
    if name == "mse":
        return F.mse_loss(out, target)
    if name == "l1":
        return F.l1_loss(out, target)
    return F.binary_cross_entropy_with_logits(out, target)


def first_tensor(out):
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, dict) or hasattr(out, "values"):
        out = list(out.values())
    for v in out:
        t = first_tensor(v) if not isinstance(v, torch.Tensor) else v
        if t is not None:
            return t
    return None


def run(mod, dtype):
    """the loss and the gradients by state_dict name, computed in dtype"""
    model = mod.model().to(dtype)
    inputs = tuple(t.to(dtype) if t.is_floating_point() else t for t in mod.inputs())
    target = mod.target()
    if target.is_floating_point():
        target = target.to(dtype)
    out = first_tensor(model(*inputs))
    loss = loss_of(mod.LOSS, out, target)
    loss.backward()
    # a tied weight once, under its first name
    return loss.item(), [(n, p.grad.detach().double().reshape(-1).tolist())
                         for n, p in model.named_parameters()]


def values(mod, dtype, w):
    """the values in dtype, and beside them the same computed in float64: their difference is
    how far the dtype's own rounding moves each value (a gradient that cancels, as a
    BatchNorm weight's ahead of another BatchNorm, is known only that well)"""
    loss, grads = run(mod, dtype)
    loss64, grads64 = run(mod, torch.float64)
    w.write("tensor,index,value,float64\n")
    w.write(f"loss,0,{loss:.9g},{loss64:.17g}\n")
    for (name, g), (_, g64) in zip(grads, grads64):
        for i, (v, v64) in enumerate(zip(g, g64)):
            w.write(f"{name}.grad,{i},{v:.9g},{v64:.17g}\n")


def dtypes(mod, dtype, autocast, w):
    from torch._subclasses.fake_tensor import FakeTensorMode
    model = mod.model().to(dtype)
    inputs = tuple(t.to(dtype) if t.is_floating_point() else t for t in mod.inputs())
    ep = torch.export.export(model, inputs)
    gm = ep.module()
    names = {n: n.name for n in gm.graph.nodes}
    rows = []

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            if n.op == "call_function" and "_assert_tensor_metadata" in str(n.target):
                return None
            if n.op == "call_function":
                args, kwargs = self.fetch_args_kwargs_from_env(n)
                cuda = torch.device("cuda")
                args = [cuda if isinstance(a, torch.device) else a for a in args]
                kwargs = {k: (cuda if k == "device" else v) for k, v in kwargs.items()}
                r = n.target(*args, **kwargs)
                if isinstance(r, torch.Tensor) and r.device.type == "cpu":
                    r = r.to(cuda)  # a factory (arange) export wrote without a device
            else:
                r = super().run_node(n)
            if n.op == "call_function" and isinstance(r, torch.Tensor):
                rows.append((names[n], str(r.dtype).replace("torch.", "")))
            return r

    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fake = {k: mode.from_tensor(v.detach()).to("cuda") for k, v in gm.state_dict().items()}
        for k, v in fake.items():
            parent, _, leaf = k.rpartition(".")
            owner = gm.get_submodule(parent) if parent else gm
            if isinstance(getattr(owner, leaf), torch.nn.Parameter):
                setattr(owner, leaf, torch.nn.Parameter(v, requires_grad=True))
            else:
                setattr(owner, leaf, v)
        args = [mode.from_tensor(t).to("cuda") for t in inputs]
        torch.set_autocast_enabled("cuda", True)
        torch.set_autocast_dtype("cuda", getattr(torch, autocast))
        torch.autocast_increment_nesting()
        try:
            Recorder(gm).run(*args)
        finally:
            torch.autocast_decrement_nesting()
            torch.set_autocast_enabled("cuda", False)
            torch.clear_autocast_cache()
    w.write("node,dtype\n")
    for n, d in rows:
        w.write(f"{n},{d}\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=("values", "dtypes"))
    ap.add_argument("script")
    ap.add_argument("--params", default="float32")
    ap.add_argument("--autocast", default="float16")
    a = ap.parse_args()
    torch.manual_seed(0)
    mod = load(a.script)
    dtype = getattr(torch, a.params)
    if a.what == "values":
        values(mod, dtype, sys.stdout)
    else:
        dtypes(mod, dtype, a.autocast, sys.stdout)


if __name__ == "__main__":
    main()
