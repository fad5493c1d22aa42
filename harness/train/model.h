/*
 * model.h: the case's model (its layers' parameters) and its data (input batch, target).
 * Parameters are the layers' kinds' (layers/layer.h), created in float32 as PyTorch's
 * defaults initialise them (uniform in +-1/sqrt(fan_in) for weight and bias) or read from
 * [init] files, then converted to the
 * case's parameter dtype, as `model.half()` does. The input and target are drawn once per
 * case, at init (rng.h's streams of the case's seed): every step trains on the same batch,
 * as the questions' code does.
 */
#ifndef AMPSCOPE_MODEL_H
#define AMPSCOPE_MODEL_H

#include "layers/layer.h"
#include "core/rng.h"
#include "autograd/run.h"

typedef struct model {
    /* each layer's parameters, in the order of its kind's params rule (layer.h) */
    tensor *layer_params[CASE_MAX_LAYERS][LAYER_MAX_PARAMS];
    tensor *params[2 * CASE_MAX_LAYERS]; /* model.parameters() order */
    int n_params;
    tensor *input, *target;
    /* drawn at init, uploaded when the target is first asked for */
    int64_t *labels;
    float *target_values;
} model;

/* Creates the parameters and the input (the target waits for the output's dtype when it
 * is randn_like); fails the run on a bad [init] or data file. */
void model_init(run *r, model *m);
/* The target, drawn the first time it is asked for (out: the model's output). */
tensor *model_target(run *r, model *m, const tensor *out);
/* Micro-batch k's rows of this rank of the [data] file at path for tensor t (t's shape:
 * batch rows): int64 values when ids, else float32 values; malloc'd, t->numel of them. */
void *model_file_rows(run *r, const char *path, int64_t k, const tensor *t, bool ids);
/* Frees the drawn values not uploaded yet (a run that ended early). */
void model_free_host(model *m);
/* Runs the layers on the input; returns a new reference to the output. */
tensor *model_forward(run *r, model *m);

#endif
