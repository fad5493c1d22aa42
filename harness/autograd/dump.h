/*
 * dump.h: `run --dump DIR` writes tensors as .npy files: DIR/init/ holds the initial
 * parameters, input and target, DIR/<step>/ the observed tensors of that step. float32 is
 * written as <f4, float16 as <f2, int64 labels as <i8; bfloat16 and the float8 formats
 * (numpy has no such dtype) as exact float32 with ".<dtype>" before ".npy" in the file name
 * ("x.bfloat16.npy", "fc1.input@float8_e4m3fn.float8_e4m3fn.npy").
 */
#ifndef AMPSCOPE_DUMP_H
#define AMPSCOPE_DUMP_H

#include "ops/backend.h"

/* Writes DIR/SUB/<name>.npy; returns non-zero with a message in err. */
int dump_tensor(backend *be, const char *dir, const char *sub, const tensor *t, char *err,
                int errlen);

#endif
