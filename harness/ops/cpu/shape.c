/*
 * shape.c: the shape ops' copies on the CPU (twins of kernels/shape.cu): narrow_copy (a
 * slice), narrow_place (a slice's gradient, a constant pad), cat and strided_copy (permute,
 * expand, repeat_interleave). Each output value is
 * loaded as float32 from where ops/shape.h says and stored through the counting store: a
 * copy within one dtype, or a widening cast (cat's type promotion), exact either way.
 */
#include "cpu.h"
#include "ops/shape.h"

typedef struct narrow_ctx {
    const tensor *x;
    tensor *y;
    narrow_geom g;
    bool place;
    float fill;
} narrow_ctx;

static void narrow_chunk(void *p, int64_t off, int64_t n, round_stats *st)
{
    const narrow_ctx *c = p;
    float buf[CPU_CHUNK];
    for (int64_t i = 0; i < n; i++) {
        int64_t src = c->place ? narrow_place_src(&c->g, off + i) : narrow_copy_src(&c->g, off + i);
        buf[i] = src < 0 ? c->fill : load_as_float(c->x->data, c->x->dtype, src);
    }
    cpu_store(buf, c->y->data, c->y->dtype, off, n, st);
}

int cpu_narrow_copy(backend *be, const tensor *x, int d, int64_t start, int64_t step, tensor *y,
                    round_stats *st)
{
    (void)be;
    narrow_ctx c = {x, y, narrow_geom_of(x, d, start, step, y), false, 0.0f};
    cpu_parallel_chunks(y->numel, narrow_chunk, &c, st);
    return 0;
}

int cpu_narrow_place(backend *be, const tensor *x, int d, int64_t start, int64_t step, float fill,
                     tensor *y, round_stats *st)
{
    (void)be;
    narrow_ctx c = {x, y, narrow_geom_of(x, d, start, step, y), true, fill};
    cpu_parallel_chunks(y->numel, narrow_chunk, &c, st);
    return 0;
}

typedef struct cat_ctx {
    const tensor *const *x;
    tensor *y;
    cat_geom g;
} cat_ctx;

static void cat_chunk(void *p, int64_t off, int64_t n, round_stats *st)
{
    const cat_ctx *c = p;
    float buf[CPU_CHUNK];
    for (int64_t i = 0; i < n; i++) {
        int w;
        int64_t src = cat_src(&c->g, off + i, &w);
        buf[i] = load_as_float(c->x[w]->data, c->x[w]->dtype, src);
    }
    cpu_store(buf, c->y->data, c->y->dtype, off, n, st);
}

int cpu_cat(backend *be, const tensor *const *x, int n, int d, tensor *y, round_stats *st)
{
    if (n < 1 || n > BACKEND_CAT_MAX) {
        snprintf(be->err, sizeof be->err, "cat of %d inputs (1 to %d)", n, BACKEND_CAT_MAX);
        return -1;
    }
    cat_ctx c = {x, y, cat_geom_of(x, n, d, y)};
    cpu_parallel_chunks(y->numel, cat_chunk, &c, st);
    return 0;
}

typedef struct strided_ctx {
    const tensor *x;
    tensor *y;
    const strided_geom *g;
} strided_ctx;

static void strided_chunk(void *p, int64_t off, int64_t n, round_stats *st)
{
    const strided_ctx *c = p;
    float buf[CPU_CHUNK];
    for (int64_t i = 0; i < n; i++)
        buf[i] = load_as_float(c->x->data, c->x->dtype, strided_src(c->g, off + i));
    cpu_store(buf, c->y->data, c->y->dtype, off, n, st);
}

int cpu_strided_copy(backend *be, const tensor *x, const strided_geom *g, tensor *y,
                     round_stats *st)
{
    (void)be;
    strided_ctx c = {x, y, g};
    cpu_parallel_chunks(y->numel, strided_chunk, &c, st);
    return 0;
}
