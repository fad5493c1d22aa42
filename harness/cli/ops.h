/*
 * ops.h: `ampscope ops`: every op the harness runs, with the ATen ops it stands for and its
 * CUDA autocast policy (ops/autocast_policy.h): the pointwise and reduction rows
 * (ops/pointwise.h, ops/reduce.h), then the layers' and losses' autocast entries
 * (layers/layer.h), as a table or as a JSON list of objects ("name", "aten", "policy",
 * "kind", "pytorch", and "layer" or "loss" for an entry of one, "arity" and "saves" for a
 * row).
 */
#ifndef AMPSCOPE_CLI_OPS_H
#define AMPSCOPE_CLI_OPS_H

#include <stdio.h>

/* the table: op, policy, what it runs in under autocast, where PyTorch lists it */
void ops_print_table(FILE *f);
/* the JSON list */
void ops_print_json(FILE *f);

#endif
