/*
 * microbatch.h: the extra micro-batches of gradient accumulation ([train] accumulate = N).
 * Micro-batch 0 is the model's own batch (model.c), so a case with accumulate = 1 is the
 * case as it was; micro-batches 1..N-1 are drawn here, once, from streams of the case's
 * seed of their own (input: normal, or token ids uniform over the vocabulary; target: as
 * [data] target says: uniform class labels, float32 randn, or randn in the output's dtype),
 * or read from the [data] input or target
 * file, whose samples [k * batch, (k + 1) * batch) they are (model_file_rows), and reused
 * every step as the single batch is. Each is `batch` samples; their tensors are named as
 * the model's ("input", "target"), as the same Python variables would be in each iteration.
 */
#ifndef AMPSCOPE_MICROBATCH_H
#define AMPSCOPE_MICROBATCH_H

#include "autograd/run.h"

/* micro-batch k's input (k >= 1), shaped and typed as `like` (the model's input) */
tensor *microbatch_input(run *r, int64_t k, const tensor *like);
/* micro-batch k's target (k >= 1) for the model output `out` */
tensor *microbatch_target(run *r, int64_t k, const tensor *out);

#endif
