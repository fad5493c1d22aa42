"""fp4_references.py: inputs and reference quantizations for tests/test_fp4_quantize.c, in
tests/references/fp4/quantize/ (.npy):

- <name>.x.npy: a bfloat16-valued float32 matrix [64, 128] (the GEMM operand), its
  magnitudes spread over many binades (lognormal) with a few blocks scaled down by up to
  2^-40, so that some NVFP4 block scales underflow E4M3 or fall below torchao's clamp 2^-6;
- <name>.te_scales.npy, <name>.te_q.npy: the scale bytes and E2M1 bytes from Transformer
  Engine's NVFP4 formulas transcribed here in float32 numpy (TE's own pure-PyTorch
  pytorch/custom_recipes/reference_nvfp4.py is the model; the formulas are the ones
  harness/ops/fp4_recipe.h cites), E4M3 and E2M1 conversions by ml_dtypes;
- <name>.ao_scales.npy, <name>.ao_q.npy: torchao 0.18's nvfp4_quantize (NVFP4Tensor.to_nvfp4's
  kernel, with the per-tensor scale from the same amax) or to_mx (MXTensor.to_mx, FLOOR);
- rht_matrix.x.npy: TE's RHT matrix, diag(signs) @ H16 / 4 in bfloat16, H16 built here by
  Sylvester's recursion, the signs TE's get_wgrad_sign_vector().

Run: /opt/torch-venv/bin/python tools/fp4_references.py (writes the folder)."""
import os

import ml_dtypes
import numpy as np
import torch
from torchao.prototype.mx_formats.kernels import unpack_uint4
from torchao.prototype.mx_formats.mx_tensor import to_mx
from torchao.prototype.mx_formats.nvfp4_tensor import nvfp4_quantize, per_tensor_amax_to_scale

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "references", "fp4", "quantize")
F32 = np.float32
SIGNS = [1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1]  # get_wgrad_sign_vector


def hadamard16():
    h = np.array([[1.0]])
    while h.shape[0] < 16:
        h = np.block([[h, h], [h, -h]])
    return h


def rht_matrix():
    m = (np.diag(SIGNS) @ hadamard16()) / 4.0
    return torch.tensor(m, dtype=torch.float32).to(torch.bfloat16).float().numpy()


def make_x(seed):
    g = np.random.default_rng(seed)
    x = g.standard_normal((64, 128)) * np.exp(g.standard_normal((64, 128)) * 1.5)
    for k in range(10):  # blocks of 16 far below the tensor's amax
        r, c = g.integers(0, 64), g.integers(0, 8) * 16
        x[r, c : c + 16] *= 2.0 ** -g.integers(10, 40)
    x[3, 32:48] = 0.0  # an all-zero block
    return torch.tensor(x, dtype=torch.float32).to(torch.bfloat16).float().numpy()


def make_grid_x(seed):
    """normal values on a grid of 2^-6 below 8 in magnitude, as bfloat16: every sum of 16
    of them times +-1/4 is exact in float32 (multiples of 2^-8 below 32), whatever the order"""
    g = np.random.default_rng(seed)
    x = np.clip(np.round(g.standard_normal((64, 128)) * 2.0 * 64) / 64, -7.9, 7.9)
    return torch.tensor(x, dtype=torch.float32).to(torch.bfloat16).float().numpy()


def e4m3(v):
    return np.asarray(v, dtype=F32).astype(ml_dtypes.float8_e4m3fn)


def e2m1_bytes(v):
    return np.asarray(v, dtype=F32).astype(ml_dtypes.float4_e2m1fn).view(np.uint8)


def te_nvfp4(x, colwise=False, rht=False, block_2d=False):
    """scale bytes and E2M1 bytes of TE's NVFP4 quantization of x's view"""
    v = np.ascontiguousarray(x.T if colwise else x).astype(F32)
    if rht:  # each 16 along a row times the matrix; exact: checked below
        w = v.reshape(-1, 16).astype(np.float64) @ rht_matrix().astype(np.float64)
        assert np.all(w.astype(F32).astype(np.float64) == w), "an RHT sum is not exact in float32"
        v = w.astype(F32).reshape(v.shape)
    r, c = v.shape
    amax = F32(np.max(np.abs(v)))
    s_enc = F32(1.0) if amax == 0 else F32(F32(448.0 * 6.0) / amax)
    s_enc = min(s_enc, F32(np.finfo(F32).max))
    t = F32(s_enc * F32(F32(1.0) / F32(6.0)))
    s_dec = F32(F32(1.0) / s_enc)
    th = 16 if block_2d else 1
    scales = np.zeros((r // th, c // 16), dtype=np.uint8)
    q = np.zeros((r, c), dtype=np.uint8)
    for bi in range(r // th):
        for bj in range(c // 16):
            blk = v[bi * th : (bi + 1) * th, bj * 16 : (bj + 1) * 16]
            sv = min(F32(F32(np.max(np.abs(blk))) * t), F32(448.0))
            s = e4m3(sv)
            scales[bi, bj] = s.view(np.uint8)
            with np.errstate(divide="ignore", over="ignore"):
                mult = F32(F32(1.0) / F32(F32(s.astype(F32)) * s_dec))
            mult = min(mult, F32(np.finfo(F32).max))
            with np.errstate(over="ignore"):
                q[bi * th : (bi + 1) * th, bj * 16 : (bj + 1) * 16] = e2m1_bytes(blk * mult)
    return scales, q


def ao_nvfp4(x):
    xt = torch.tensor(x).to(torch.bfloat16)
    amax = torch.max(torch.abs(xt)).float()
    scales, data = nvfp4_quantize(xt, 16, per_tensor_amax_to_scale(amax))
    q = unpack_uint4(data.contiguous().view(torch.uint8)).numpy()
    return scales.view(torch.uint8).numpy().reshape(64, 8), q.reshape(64, 128)


def ao_mxfp4(x, colwise=False):
    v = np.ascontiguousarray(x.T if colwise else x)
    scale, data = to_mx(torch.tensor(v).to(torch.bfloat16), torch.float4_e2m1fn_x2, 32)
    q = unpack_uint4(data.contiguous().view(torch.uint8)).numpy().reshape(v.shape)
    return scale.view(torch.uint8).numpy().reshape(v.shape[0], -1), q


def save(name, **arrays):
    for k, a in arrays.items():
        np.save(os.path.join(OUT, f"{name}.{k}.npy"), a.astype(np.float32))  # bytes exact in float32


def main():
    os.makedirs(OUT, exist_ok=True)
    np.save(os.path.join(OUT, "rht_matrix.x.npy"), rht_matrix())
    x = make_x(1)
    save("nvfp4_rowwise", x=x)
    s, q = te_nvfp4(x)
    save("nvfp4_rowwise", te_scales=s, te_q=q)
    s, q = ao_nvfp4(x)
    save("nvfp4_rowwise", ao_scales=s, ao_q=q)
    x = make_grid_x(2)
    s, q = te_nvfp4(x, colwise=True, rht=True)
    save("nvfp4_colwise_rht", x=x, te_scales=s, te_q=q)
    x = make_x(3)
    s, q = te_nvfp4(x, block_2d=True)
    save("nvfp4_2d", x=x, te_scales=s, te_q=q)
    for name, colwise in (("mxfp4_rowwise", False), ("mxfp4_colwise", True)):
        x = make_x(4 + colwise)
        s, q = ao_mxfp4(x, colwise)
        save(name, x=x, ao_scales=s, ao_q=q)


if __name__ == "__main__":
    main()
