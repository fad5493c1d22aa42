"""fp4_tables.py: every float32 bit pattern converted to float4_e2m1fn and float8_e8m0fnu by
ml_dtypes, and to float8_e8m0fnu by PyTorch (torch.float8_e8m0fnu, c10's conversion), both
implementations independent of ampscope's, written as runs: one row per float32 pattern
where the output byte changes (lib,dst,first,byte; hex), for tests/test_fp4_format.c. The
runs are few because both conversions are monotonic in |x| within each sign.
Run: /opt/torch-venv/bin/python tests/references/fp4/fp4_tables.py > tests/references/fp4/fp4_runs.csv"""
import ml_dtypes
import numpy as np
import torch

CHUNK = 1 << 24
BASE = np.arange(CHUNK, dtype=np.uint32)
convs = {
    ("ml_dtypes", "float4_e2m1fn"): lambda x: x.astype(ml_dtypes.float4_e2m1fn).view(np.uint8),
    ("ml_dtypes", "float8_e8m0fnu"): lambda x: x.astype(ml_dtypes.float8_e8m0fnu).view(np.uint8),
    ("torch", "float8_e8m0fnu"): lambda x: torch.from_numpy(x)
    .to(torch.float8_e8m0fnu)
    .view(torch.uint8)
    .numpy(),
}
print(f"# ml_dtypes {ml_dtypes.__version__}, torch {torch.__version__}, numpy {np.__version__}")
print("lib,dst,first,byte")
for (lib, dst), conv in convs.items():
    prev = -1
    for start in range(0, 1 << 32, CHUNK):
        x = (BASE + np.uint32(start)).view(np.float32)
        y = conv(x)
        change = np.flatnonzero(y[1:] != y[:-1]) + 1
        if y[0] != prev:
            print(f"{lib},{dst},0x{start:08x},0x{int(y[0]):02x}")
        for i in change:
            print(f"{lib},{dst},0x{start + int(i):08x},0x{int(y[i]):02x}")
        prev = int(y[-1])
