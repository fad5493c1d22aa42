/*
 * broadcast.h: NumPy's (and PyTorch's) broadcasting of tensor shapes, at most
 * TENSOR_MAX_DIMS dims: shapes are right-aligned, and where two dims differ one of them must
 * be 1, which repeats. shape_broadcast gives the shape operands broadcast to; bcast_view
 * says where element i of an output reads each operand, with the dims merged wherever every
 * operand allows (a [B, T, C] output with a [T, C] operand is two dims: B, where the operand
 * repeats, and T * C, where it runs along), so that the CPU's loads walk runs and the CUDA
 * kernels divide by few dims. Both backends build it (bcast_index on the device too).
 */
#ifndef AMPSCOPE_BROADCAST_H
#define AMPSCOPE_BROADCAST_H

#include <stdbool.h>
#include <stdint.h>

#include "core/half.h"
#include "tensor.h"

#define BCAST_MAX_OPERANDS 3

/* The shape a [na] and b [nb] broadcast to, into out [*nout]; false when a pair of dims is
 * neither equal nor has a 1. out may be a or b. */
static inline bool shape_broadcast(int na, const int64_t *a, int nb, const int64_t *b, int *nout,
                                   int64_t *out)
{
    int n = na > nb ? na : nb;
    int64_t r[TENSOR_MAX_DIMS];
    if (n > TENSOR_MAX_DIMS)
        return false;
    for (int j = 0; j < n; j++) { /* j counts from the last dim */
        int64_t da = j < na ? a[na - 1 - j] : 1, db = j < nb ? b[nb - 1 - j] : 1;
        if (da != db && da != 1 && db != 1)
            return false;
        r[n - 1 - j] = da == 1 ? db : da;
    }
    for (int j = 0; j < n; j++)
        out[j] = r[j];
    *nout = n;
    return true;
}

/* Element i of an output, its index (i_0, ..., i_{nd-1}) in dims dim[] (the first the
 * slowest), reads element sum_k i_k * stride[op][k] of operand op; same[op]: the operand has
 * the output's layout (element i), so a load needs no index arithmetic. */
typedef struct bcast_view {
    int nd;
    int64_t dim[TENSOR_MAX_DIMS];
    int64_t stride[BCAST_MAX_OPERANDS][TENSOR_MAX_DIMS];
    bool same[BCAST_MAX_OPERANDS];
} bcast_view;

/* The view of x[0..n) (each broadcastable to out's shape; NULL ones are not read) against
 * out. */
static inline bcast_view bcast_view_of(const tensor *out, const tensor *const *x, int n)
{
    bcast_view v;
    memset(&v, 0, sizeof v);
    int64_t dim[TENSOR_MAX_DIMS], stride[BCAST_MAX_OPERANDS][TENSOR_MAX_DIMS] = {{0}};
    int nd = out->ndim;
    for (int j = 0; j < nd; j++)
        dim[j] = out->shape[j];
    for (int op = 0; op < n; op++) {
        v.same[op] = !x[op] || x[op]->numel == out->numel;
        if (!x[op])
            continue;
        int64_t s = 1;
        for (int j = 0; j < x[op]->ndim; j++) { /* from the last dim */
            int at = x[op]->ndim - 1 - j, oj = nd - 1 - j;
            int64_t d = x[op]->shape[at];
            stride[op][oj] = d == 1 ? 0 : s;
            s *= d;
        }
    }
    /* drop dims of 1, then merge a dim into the one after it where every operand runs on
     * from one into the other (or repeats over both) */
    for (int j = 0; j < nd; j++) {
        if (dim[j] == 1)
            continue;
        bool merge = v.nd > 0;
        for (int op = 0; merge && op < n; op++)
            merge = v.stride[op][v.nd - 1] == stride[op][j] * dim[j];
        if (merge) {
            v.dim[v.nd - 1] *= dim[j];
            for (int op = 0; op < n; op++)
                v.stride[op][v.nd - 1] = stride[op][j];
            continue;
        }
        v.dim[v.nd] = dim[j];
        for (int op = 0; op < n; op++)
            v.stride[op][v.nd] = stride[op][j];
        v.nd++;
    }
    if (v.nd == 0) { /* one element */
        v.dim[0] = 1;
        v.nd = 1;
    }
    return v;
}

/* the element of operand op that element i of the output reads */
static inline AMP_HD int64_t bcast_index(const bcast_view *v, int op, int64_t i)
{
    if (v->same[op])
        return i;
    int64_t at = 0;
    for (int k = v->nd - 1; k >= 0; k--) {
        int64_t q = i / v->dim[k];
        at += (i - q * v->dim[k]) * v->stride[op][k];
        i = q;
    }
    return at;
}

#endif
