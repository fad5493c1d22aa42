/*
 * reduce.c: the reduction rows (ops/reduce.h) on the CPU, twin of kernels/reduce.cu, in the
 * order reduce.h fixes (spans, lanes, accumulators, pairwise trees), so that both backends
 * give the same bits. For every row the list makes its loops, into which the compiler
 * inlines the row's formulas (reduce_math.h):
 *  - x's innermost dim reduced: a work item is one output's span; its values, contiguous in
 *    runs, fill RD_SWEEP accumulators at a time (value j of the span into accumulator
 *    j % RD_SWEEP, which is lane j % RD_LANES's accumulator (j / RD_LANES) % RD_ACCS);
 *  - x's innermost dim kept: a work item is a span of a tile of RD_TILE neighbouring
 *    outputs, whose values at one j are contiguous, each output with its own accumulators;
 * then each output's spans combine and project, and the counting store rounds them once.
 * The projected values live in scratch of one float per output (workspace), as the
 * reductions this replaced used, and so do one span's partial results where they are
 * floats; more spans' partial results live on the stack when few, else in scratch.
 */
#include <string.h>

#include "cpu.h"

#define RD_TILE 32          /* outputs of one work item where the innermost dim is kept */
#define RD_BLOCK 2048       /* values loaded at once where the innermost dim is reduced */
#define RD_STACK_PARTS 1024 /* spans' partial results kept on the stack, at most */

typedef struct rd_call {
    const tensor *x;
    rd_view v;
    op_params p;
    void *part; /* v.n_out * v.spans partial results, of the row's accumulator type */
} rd_call;

/* the offset of value j from its output's start (one reduced group: a product) */
static inline int64_t value_offset(const rd_view *v, int64_t j)
{
    return v->nr == 1 ? j * v->rstride[0] : rd_offset(v, j);
}

/* values [j, j + n) of the output starting at base, the innermost dim reduced (runs of the
 * innermost reduced group are contiguous) */
static void load_values(const rd_call *c, int64_t base, int64_t j, int64_t n, float *dst)
{
    const rd_view *v = &c->v;
    int64_t inner = v->nr ? v->rdim[v->nr - 1] : 1;
    while (n > 0) {
        int64_t ji = j % inner, run = inner - ji < n ? inner - ji : n;
        cpu_load(c->x, base + value_offset(v, j), run, dst);
        dst += run, j += run, n -= run;
    }
}

/* one row's loops: a span of one output, a span of a tile of outputs, the spans' tree */
#define RD_LOOPS(op, ...)                                                                          \
    /* acc[RD_SWEEP]'s lanes, then the lanes pairwise */                                           \
    static rd_##op##_acc op##_lanes(const rd_##op##_acc *acc, const op_params *p)                  \
    {                                                                                              \
        rd_##op##_acc lane[RD_LANES];                                                              \
        for (int l = 0; l < RD_LANES; l++) {                                                       \
            lane[l] = acc[l];                                                                      \
            for (int a = 1; a < RD_ACCS; a++)                                                      \
                lane[l] = rd_##op##_combine(lane[l], acc[a * RD_LANES + l], p);                    \
        }                                                                                          \
        for (int o = 1; o < RD_LANES; o <<= 1)                                                     \
            for (int l = 0; l + o < RD_LANES; l += 2 * o)                                          \
                lane[l] = rd_##op##_combine(lane[l], lane[l + o], p);                              \
        return lane[0];                                                                            \
    }                                                                                              \
    static void op##_span_inner(const rd_call *c, int64_t o, int s)                                \
    {                                                                                              \
        const rd_view *v = &c->v;                                                                  \
        const op_params p = c->p;                                                                  \
        rd_##op##_acc acc[RD_SWEEP];                                                               \
        for (int k = 0; k < RD_SWEEP; k++)                                                         \
            acc[k] = rd_##op##_ident(&p);                                                          \
        int64_t j0 = s * v->span, j1 = j0 + v->span < v->R ? j0 + v->span : v->R;                  \
        int64_t base = rd_base(v, o);                                                              \
        float buf[RD_BLOCK];                                                                       \
        for (int64_t j = j0; j < j1; j += RD_BLOCK) { /* RD_BLOCK: whole sweeps */                 \
            int n = j1 - j < RD_BLOCK ? (int)(j1 - j) : RD_BLOCK, b = 0;                           \
            load_values(c, base, j, n, buf);                                                       \
            for (; b + RD_SWEEP <= n; b += RD_SWEEP)                                               \
                for (int k = 0; k < RD_SWEEP; k++)                                                 \
                    acc[k] = rd_##op##_reduce(acc[k], buf[b + k], &p);                             \
            for (int k = 0; b + k < n; k++)                                                        \
                acc[k] = rd_##op##_reduce(acc[k], buf[b + k], &p);                                 \
        }                                                                                          \
        ((rd_##op##_acc *)c->part)[o * v->spans + s] = op##_lanes(acc, &p);                        \
    }                                                                                              \
    static void op##_span_tile(const rd_call *c, int64_t o0, int tn, int s)                        \
    {                                                                                              \
        const rd_view *v = &c->v;                                                                  \
        const op_params p = c->p;                                                                  \
        rd_##op##_acc acc[RD_SWEEP][RD_TILE]; /* [accumulator][output]: the adds vectorise */      \
        for (int k = 0; k < RD_SWEEP; k++)                                                         \
            for (int t = 0; t < RD_TILE; t++)                                                      \
                acc[k][t] = rd_##op##_ident(&p);                                                   \
        int64_t j0 = s * v->span, j1 = j0 + v->span < v->R ? j0 + v->span : v->R;                  \
        int64_t base = rd_base(v, o0);                                                             \
        float buf[RD_TILE] = {0};                                                                  \
        for (int64_t j = j0, k = 0; j < j1; j++, k = k + 1 == RD_SWEEP ? 0 : k + 1) {              \
            cpu_load(c->x, base + value_offset(v, j), tn, buf);                                    \
            for (int t = 0; t < RD_TILE; t++)                                                      \
                acc[k][t] = rd_##op##_reduce(acc[k][t], buf[t], &p);                               \
        }                                                                                          \
        for (int t = 0; t < tn; t++) {                                                             \
            rd_##op##_acc column[RD_SWEEP];                                                        \
            for (int k = 0; k < RD_SWEEP; k++)                                                     \
                column[k] = acc[k][t];                                                             \
            ((rd_##op##_acc *)c->part)[(o0 + t) * v->spans + s] = op##_lanes(column, &p);          \
        }                                                                                          \
    }                                                                                              \
    /* output o's spans pairwise, projected */                                                     \
    static float op##_finish(const rd_call *c, int64_t o)                                          \
    {                                                                                              \
        const rd_view *v = &c->v;                                                                  \
        rd_##op##_acc *part = (rd_##op##_acc *)c->part + o * v->spans;                             \
        for (int d = 1; d < v->spans; d <<= 1)                                                     \
            for (int g = 0; g + d < v->spans; g += 2 * d)                                          \
                part[g] = rd_##op##_combine(part[g], part[g + d], &c->p);                          \
        return rd_##op##_project(part[0], v->R, v->n_out, &c->p);                                  \
    }
REDUCE_OPS(RD_LOOPS)

typedef struct rd_fns {
    void (*span_inner)(const rd_call *c, int64_t o, int s);
    void (*span_tile)(const rd_call *c, int64_t o0, int tn, int s);
    float (*finish)(const rd_call *c, int64_t o);
    size_t acc_bytes;
} rd_fns;
#define RD_FNS(op, ...)                                                                            \
    [RD_OP_##op] = {op##_span_inner, op##_span_tile, op##_finish, sizeof(rd_##op##_acc)},
static const rd_fns rd_fns_of[RD_OP_COUNT] = {REDUCE_OPS(RD_FNS)};

int cpu_reduce_forward(backend *be, rd_op op, const op_params *p, const tensor *x, unsigned dims,
                       tensor *y, round_stats *st)
{
    const rd_fns *f = &rd_fns_of[op];
    rd_call c = {.x = x, .v = rd_view_of(x->ndim, x->shape, dims), .p = *p};
    const rd_view *v = &c.v;
    int64_t parts = v->n_out * v->spans, part_floats = (parts * (int64_t)f->acc_bytes + 3) / 4;
    /* the projected values, one float per output; a float accumulator of one span per
     * output is its own output's slot there (finish reads it before it writes it) */
    float one, *pre = v->n_out == 1 ? &one : cpu_scratch(be, v->n_out);
    if (!pre)
        return -1;
    bool in_pre = v->spans == 1 && f->acc_bytes == sizeof(float);
    float stack_parts[RD_STACK_PARTS], *heap_parts = NULL;
    if (!in_pre && part_floats > RD_STACK_PARTS && !(heap_parts = cpu_scratch(be, part_floats))) {
        if (pre != &one)
            cpu_scratch_free(be, pre, v->n_out);
        return -1;
    }
    c.part = in_pre ? (void *)pre : heap_parts ? (void *)heap_parts : (void *)stack_parts;
    if (v->inner_reduced) {
#pragma omp parallel for schedule(dynamic, 1) if (v->n_out * v->R >= (1 << 16))
        for (int64_t w = 0; w < parts; w++)
            f->span_inner(&c, w / v->spans, (int)(w % v->spans));
    } else { /* tiles of neighbouring outputs within the innermost kept group */
        int64_t inner = v->kdim[v->nk - 1], per = (inner + RD_TILE - 1) / RD_TILE;
        int64_t items = v->n_out / inner * per * v->spans;
#pragma omp parallel for schedule(dynamic, 1) if (v->n_out * v->R >= (1 << 16))
        for (int64_t w = 0; w < items; w++) {
            int64_t s = w % v->spans, tile = w / v->spans, t0 = tile % per * RD_TILE;
            int64_t tn = inner - t0 < RD_TILE ? inner - t0 : RD_TILE;
            f->span_tile(&c, tile / per * inner + t0, (int)tn, (int)s);
        }
    }
    for (int64_t o = 0; o < v->n_out; o++)
        pre[o] = f->finish(&c, o);
    cpu_store(pre, y->data, y->dtype, 0, v->n_out, st);
    if (pre != &one)
        cpu_scratch_free(be, pre, v->n_out);
    cpu_scratch_free(be, heap_parts, part_floats);
    return 0;
}

/* ---- backward: dx = the row's backward at every element of x ---- */

typedef struct rd_back {
    rd_op op;
    rd_view v;
    op_params p;
    const tensor *dy, *x, *y;
    const int64_t *count; /* per output (RD_COUNT), else NULL */
    const tensor *mean;   /* per output (RD_MEAN), else NULL */
    tensor *dx;
} rd_back;

#define RD_BACKWARD_CHUNK(op, backward, ...)                                                       \
    static void op##_backward_chunk(void *ctx, int64_t off, int64_t n, round_stats *st)            \
    {                                                                                              \
        const rd_back *c = ctx;                                                                    \
        float g[CPU_CHUNK], xv[((backward)&RD_SAVE_X) ? CPU_CHUNK : 1];                            \
        if ((backward)&RD_SAVE_X)                                                                  \
            cpu_load(c->x, off, n, xv);                                                            \
        const op_params p = c->p;                                                                  \
        dtype dt = c->dx->dtype;                                                                   \
        for (int64_t i = 0; i < n; i++) {                                                          \
            int64_t o = rd_output_of(&c->v, off + i);                                              \
            float y = ((backward)&RD_SAVE_OUT) ? load_as_float(c->y->data, c->y->dtype, o) : 0;    \
            float m = c->mean ? load_as_float(c->mean->data, c->mean->dtype, o) : 0;               \
            g[i] = rd_##op##_backward(load_as_float(c->dy->data, c->dy->dtype, o),                 \
                                      ((backward)&RD_SAVE_X) ? xv[i] : 0, y,                       \
                                      c->count ? c->count[o] : 0, m, c->v.R, &p, dt);              \
        }                                                                                          \
        cpu_store(g, c->dx->data, dt, off, n, st);                                                 \
    }
REDUCE_OPS(RD_BACKWARD_CHUNK)
#define RD_BACKWARD_ENTRY(op, ...) [RD_OP_##op] = op##_backward_chunk,
static const cpu_chunk_fn backward_chunks[RD_OP_COUNT] = {REDUCE_OPS(RD_BACKWARD_ENTRY)};

/* per output, how many of its values the row's predicate holds for (exact in any order) */
static void count_ties(rd_op op, const rd_view *v, const tensor *x, const tensor *y, int64_t *count)
{
    memset(count, 0, sizeof(int64_t) * (size_t)v->n_out);
    for (int64_t i = 0; i < x->numel; i++) {
        int64_t o = rd_output_of(v, i);
        float xi = load_as_float(x->data, x->dtype, i), yo = load_as_float(y->data, y->dtype, o);
        switch (op) {
#define RD_COUNT_CASE(name, ...)                                                                   \
    case RD_OP_##name:                                                                             \
        count[o] += rd_##name##_counts(xi, yo);                                                    \
        break;
            REDUCE_OPS(RD_COUNT_CASE)
#undef RD_COUNT_CASE
        case RD_OP_COUNT:
            break;
        }
    }
}

int cpu_reduce_backward(backend *be, rd_op op, const op_params *p, const tensor *dy,
                        const tensor *x, const tensor *y, unsigned dims, tensor *dx,
                        round_stats *st)
{
    rd_back c = {.op = op,
                 .v = rd_view_of(dx->ndim, dx->shape, dims),
                 .p = *p,
                 .dy = dy,
                 .x = x,
                 .y = y,
                 .dx = dx};
    int64_t *count = NULL, count_floats = 2 * c.v.n_out;
    if (rd_rows[op].backward & RD_COUNT) {
        if (!(count = (int64_t *)cpu_scratch(be, count_floats)))
            return -1;
        count_ties(op, &c.v, x, y, count);
    }
    c.count = count;
    /* the mean row's result in x's dtype, one value per output (at most 4 bytes each) */
    tensor mean;
    if (rd_rows[op].backward & RD_MEAN) {
        mean = *x;
        mean.ndim = 1, mean.shape[0] = mean.numel = c.v.n_out;
        const op_params none = {.seed = 0};
        if (!(mean.data = cpu_scratch(be, c.v.n_out)) ||
            cpu_reduce_forward(be, RD_OP_mean, &none, x, dims, &mean, NULL)) {
            cpu_scratch_free(be, (float *)count, count_floats);
            cpu_scratch_free(be, (float *)mean.data, c.v.n_out);
            return -1;
        }
        c.mean = &mean;
    }
    cpu_parallel_chunks(dx->numel, backward_chunks[op], &c, st);
    cpu_scratch_free(be, (float *)count, count_floats);
    if (c.mean)
        cpu_scratch_free(be, (float *)mean.data, c.v.n_out);
    return 0;
}
