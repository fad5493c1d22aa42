/*
 * dump.h: `run --dump DIR` writes tensors as .npy files: DIR/init/ holds the initial
 * parameters, input and target, DIR/<step>/ the observed tensors of that step. float32 is
 * written as <f4, float16 as <f2, int64 labels as <i8; bfloat16 is written as exact float32
 * with ".bfloat16" before ".npy" in the file name.
 */
#ifndef AMPSCOPE_DUMP_H
#define AMPSCOPE_DUMP_H

#include "backend.h"

/* Writes DIR/SUB/<name>.npy; returns non-zero with a message in err. */
int dump_tensor(backend *be, const char *dir, const char *sub, const tensor *t, char *err,
                int errlen);

#endif
