/*
 * shape.h: where each value of a shape op's output comes from, shared by the CPU
 * (cpu/shape.c) and the CUDA kernels (kernels/shape.cu), so that both backends index alike.
 * A tensor is seen along one dim d as [outer, n, inner] (inner: the product of the dims after
 * d); element i of the output is at position p = i / inner % n along d. A strided copy
 * (permute, expand, repeat_interleave) reads its strided_geom instead.
 */
#ifndef AMPSCOPE_SHAPE_H
#define AMPSCOPE_SHAPE_H

#include <stdint.h>

#include "backend.h"
#include "core/half.h"

/* A copy between x and y along dim d: y[.., start + j * step, ..] and x[.., j, ..]
 * (narrow_place), or the reverse (narrow_copy) */
typedef struct narrow_geom {
    int64_t inner, nx, ny, start, step;
} narrow_geom;

static inline narrow_geom narrow_geom_of(const tensor *x, int d, int64_t start, int64_t step,
                                         const tensor *y)
{
    narrow_geom g = {1, x->shape[d], y->shape[d], start, step};
    for (int k = d + 1; k < y->ndim; k++)
        g.inner *= y->shape[k];
    return g;
}

/* narrow_copy: the index in x of y's element i */
static AMP_HD inline int64_t narrow_copy_src(const narrow_geom *g, int64_t i)
{
    int64_t k = i % g->inner, p = i / g->inner % g->ny, o = i / (g->inner * g->ny);
    return (o * g->nx + g->start + p * g->step) * g->inner + k;
}

/* narrow_place: the index in x of y's element i, or -1 for a position no x value lands on */
static AMP_HD inline int64_t narrow_place_src(const narrow_geom *g, int64_t i)
{
    int64_t k = i % g->inner, p = i / g->inner % g->ny, o = i / (g->inner * g->ny);
    int64_t q = p - g->start;
    if (q < 0 || q % g->step != 0 || q / g->step >= g->nx)
        return -1;
    return (o * g->nx + q / g->step) * g->inner + k;
}

/* cat: the inputs' lengths along d, and y's */
typedef struct cat_geom {
    int n;
    int64_t inner, ny, len[BACKEND_CAT_MAX];
} cat_geom;

static inline cat_geom cat_geom_of(const tensor *const *x, int n, int d, const tensor *y)
{
    cat_geom g = {n, 1, y->shape[d], {0}};
    for (int k = d + 1; k < y->ndim; k++)
        g.inner *= y->shape[k];
    for (int k = 0; k < n; k++)
        g.len[k] = x[k]->shape[d];
    return g;
}

/* cat: the input (*which) and the index in it of y's element i */
static AMP_HD inline int64_t cat_src(const cat_geom *g, int64_t i, int *which)
{
    int64_t k = i % g->inner, p = i / g->inner % g->ny, o = i / (g->inner * g->ny);
    int w = 0;
    while (w + 1 < g->n && p >= g->len[w])
        p -= g->len[w++];
    *which = w;
    return (o * g->len[w] + p) * g->inner + k;
}

/* the strides of a contiguous tensor of `shape` */
static inline void contiguous_strides(int ndim, const int64_t *shape, int64_t *stride)
{
    for (int64_t k = ndim - 1, s = 1; k >= 0; s *= shape[k], k--)
        stride[k] = s;
}

/* strided_copy: the index in x of y's element i (backend.h's strided_geom) */
static AMP_HD inline int64_t strided_src(const strided_geom *g, int64_t i)
{
    int64_t src = 0;
    for (int k = g->ndim - 1; k >= 0; k--) {
        src += i % g->size[k] * g->stride[k];
        i /= g->size[k];
    }
    return src;
}

#endif
