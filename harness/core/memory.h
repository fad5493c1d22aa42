/*
 * memory.h: the memory account. Every buffer a run allocates belongs to one category, and
 * the account keeps the current and peak bytes of each category and the peak of their sum
 * (workspace excluded: it exists only because of how a backend emulates or computes, not
 * in what PyTorch would hold). The numbers come from the allocator itself (tensor.c and the
 * backends' scratch allocations), never from a formula.
 *
 * Categories:
 *   params           the model's parameters, in their dtype
 *   grads            every gradient buffer: parameters' .grad, the gradients of autocast
 *                    copies, and activation gradients while backward holds them
 *   master_params    fp32 master copies kept by the optimizer (master_weights = yes)
 *   optimizer_state  momentum buffers, Adam's exp_avg / exp_avg_sq, RMSprop's square_avg
 *   activations      tensors the forward pass produces (kept for backward or not yet freed)
 *   autocast_cache   autocast's low-precision copies of parameters
 *   inputs           the input batch and the targets
 *   buffers          a module's buffers (batch_norm's running_mean and running_var), in
 *                    the parameters' dtype; state_dict() holds them with the parameters,
 *                    but no optimizer steps them and they have no gradient
 *   workspace        float32 copies of half operands and library scratch
 */
#ifndef AMPSCOPE_MEMORY_H
#define AMPSCOPE_MEMORY_H

#include <stdint.h>

typedef enum mem_category {
    MEM_PARAMS = 0,
    MEM_GRADS,
    MEM_MASTER_PARAMS,
    MEM_OPTIMIZER_STATE,
    MEM_ACTIVATIONS,
    MEM_AUTOCAST_CACHE,
    MEM_INPUTS,
    MEM_BUFFERS,
    MEM_WORKSPACE,
    MEM_CATEGORY_COUNT
} mem_category;

typedef struct mem_account {
    int64_t current[MEM_CATEGORY_COUNT];
    int64_t peak[MEM_CATEGORY_COUNT];
    int64_t total;      /* current sum, workspace excluded */
    int64_t total_peak; /* peak of that sum */
} mem_account;

static inline void mem_account_add(mem_account *a, mem_category c, int64_t delta)
{
    if (!a)
        return;
    a->current[c] += delta;
    if (a->current[c] > a->peak[c])
        a->peak[c] = a->current[c];
    if (c != MEM_WORKSPACE) {
        a->total += delta;
        if (a->total > a->total_peak)
            a->total_peak = a->total;
    }
}

#ifdef __cplusplus
extern "C" {
#endif
const char *mem_category_name(mem_category c);
#ifdef __cplusplus
}
#endif

#endif
