"""fp8_tables.py: every float16 and bfloat16 bit pattern converted to float8_e4m3fn and
float8_e5m2 by ml_dtypes (an implementation independent of ampscope's), written as runs:
one row per input pattern where the output byte changes (src,dst,first,byte, hex), for
tests/test_fp8_format.c. Run: /opt/torch-venv/bin/python tests/references/fp8/fp8_tables.py
> tests/references/fp8/fp8_runs.csv"""
import ml_dtypes
import numpy as np

srcs = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
dsts = {"float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2}
print(f"# ml_dtypes {ml_dtypes.__version__}, numpy {np.__version__}")
print("src,dst,first,byte")
pats = np.arange(65536, dtype=np.uint32).astype(np.uint16)
for sn, st in srcs.items():
    x = pats.view(st).astype(np.float32)  # exact: every float16 and bfloat16 is a float32
    for dn, dt in dsts.items():
        y = x.astype(dt).view(np.uint8)
        prev = -1
        for i in range(65536):
            if y[i] != prev:
                print(f"{sn},{dn},0x{i:04x},0x{int(y[i]):02x}")
                prev = y[i]
