/*
 * host_values.h: a tensor's values brought to the host as float32 and stored back, for the
 * trainer's few host-side computations on gradients (accumulation's adds, which count the
 * adds that changed nothing; clipping's norms; the loss's division by the micro-batch
 * count). They go through the backend's download and upload, so every backend runs them
 * alike. In the memory preflight (the counting backend) tensors hold no values: there
 * these functions do nothing and return zeros.
 */
#ifndef AMPSCOPE_HOST_VALUES_H
#define AMPSCOPE_HOST_VALUES_H

#include "run.h"

/* true in the preflight's pass, where tensors hold no values */
bool host_values_dry(const run *r);
/* t's values as float32 in a new buffer (free() it); fails the run when out of memory */
float *host_values_get(run *r, const tensor *t);
/* t = round(v[i]) into t's dtype; st (may be NULL) tallies each rounding as an op does */
void host_values_put(run *r, tensor *t, const float *v, round_stats *st);

#endif
