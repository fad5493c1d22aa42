/*
 * pointwise.c: the pointwise rows (ops/pointwise.h) on the CPU, twin of
 * kernels/pointwise.cu. For every row the list makes one chunk loop for its forward and one
 * for each operand's backward, into which the compiler inlines the row's formula
 * (pointwise_math.h); the backend's two entries pick the loop and run it over the output in
 * CPU_CHUNK pieces on every thread (cpu_parallel_chunks), loading each operand through its
 * broadcast (ops/broadcast.h: a run along the innermost merged dim at a time) and storing
 * with the counting store (cpu_store, at the ISA level the harness runs at).
 */
#include "cpu.h"

#include "ops/broadcast.h"

typedef struct pw_call {
    const tensor *x[PW_MAX_ARITY]; /* the operands; in a backward the saved ones (or NULL) */
    const tensor *dy, *y;          /* a backward's output gradient and saved result */
    bcast_view v;                  /* the operands against the output (dy) */
    op_params p;
    tensor *out;
} pw_call;

/* elements [off, off + n) of the output's view of operand k, as float32, into dst */
static void load_operand(const pw_call *c, int k, int64_t off, int64_t n, float *dst)
{
    const tensor *t = c->x[k];
    const bcast_view *v = &c->v;
    if (v->same[k]) {
        cpu_load(t, off, n, dst);
        return;
    }
    int nd = v->nd;
    int64_t idx[TENSOR_MAX_DIMS], at = 0, rem = off;
    for (int d = nd - 1; d >= 0; d--) {
        idx[d] = rem % v->dim[d];
        rem /= v->dim[d];
        at += idx[d] * v->stride[k][d];
    }
    /* the innermost dim runs on (stride 1) or repeats one value (stride 0) */
    int64_t inner = v->dim[nd - 1], s = v->stride[k][nd - 1];
    while (n > 0) {
        int64_t run = inner - idx[nd - 1] < n ? inner - idx[nd - 1] : n;
        if (s == 1) {
            cpu_load(t, at, run, dst);
        } else {
            float x = load_as_float(t->data, t->dtype, at);
            for (int64_t i = 0; i < run; i++)
                dst[i] = x;
        }
        dst += run;
        n -= run;
        at += run * s;
        idx[nd - 1] += run;
        for (int d = nd - 1; d > 0 && idx[d] == v->dim[d]; d--) {
            at += v->stride[k][d - 1] - idx[d] * v->stride[k][d];
            idx[d] = 0;
            idx[d - 1]++;
        }
    }
}

/* operand j's value at element i of a chunk, where the row has it (0 past its arity) */
#define PW_ARG(j, arity) ((arity) > (j) ? v[j][i] : 0.0f)

#define PW_FORWARD_LOOP(name, arity, ...)                                                          \
    static void name##_forward_chunk(void *ctx, int64_t off, int64_t n, round_stats *st)           \
    {                                                                                              \
        const pw_call *c = ctx;                                                                    \
        float v[arity][CPU_CHUNK];                                                                 \
        for (int k = 0; k < (arity); k++)                                                          \
            load_operand(c, k, off, n, v[k]);                                                      \
        const op_params p = c->p;                                                                  \
        dtype dt = c->out->dtype;                                                                  \
        for (int64_t i = 0; i < n; i++)                                                            \
            v[0][i] =                                                                              \
                pw_##name##_forward(v[0][i], PW_ARG(1, arity), PW_ARG(2, arity), &p, off + i, dt); \
        cpu_store(v[0], c->out->data, dt, off, n, st);                                             \
    }
POINTWISE_OPS(PW_FORWARD_LOOP)

/* the saved operand j at element i of a chunk (0 where the row does not save it) */
#define PW_SAVED(j, arity, backward) ((arity) > (j) && ((backward)&PW_SAVES(j)) ? v[j][i] : 0.0f)

#define PW_BACKWARD_LOOP(k, name, arity, backward)                                                 \
    static void name##_backward_##k##_chunk(void *ctx, int64_t off, int64_t n, round_stats *st)    \
    {                                                                                              \
        const pw_call *c = ctx;                                                                    \
        float g[CPU_CHUNK], v[arity][CPU_CHUNK], y[((backward)&PW_SAVE_OUT) ? CPU_CHUNK : 1];      \
        cpu_load(c->dy, off, n, g);                                                                \
        for (int j = 0; j < (arity); j++)                                                          \
            if ((backward)&PW_SAVES(j))                                                            \
                load_operand(c, j, off, n, v[j]);                                                  \
        if ((backward)&PW_SAVE_OUT)                                                                \
            cpu_load(c->y, off, n, y);                                                             \
        const op_params p = c->p;                                                                  \
        dtype dt = c->out->dtype;                                                                  \
        for (int64_t i = 0; i < n; i++)                                                            \
            g[i] = pw_##name##_backward_##k(                                                       \
                g[i], PW_SAVED(0, arity, backward), PW_SAVED(1, arity, backward),                  \
                PW_SAVED(2, arity, backward), ((backward)&PW_SAVE_OUT) ? y[i] : 0.0f, &p, off + i, \
                dt);                                                                               \
        cpu_store(g, c->out->data, dt, off, n, st);                                                \
    }
#define PW_BACKWARD_LOOPS(name, arity, backward, ...)                                              \
    PW_EACH_OPERAND(arity, PW_BACKWARD_LOOP, name, arity, backward)
POINTWISE_OPS(PW_BACKWARD_LOOPS)

#define PW_FORWARD_ENTRY(name, ...) [PW_OP_##name] = name##_forward_chunk,
static const cpu_chunk_fn forward_chunks[PW_OP_COUNT] = {POINTWISE_OPS(PW_FORWARD_ENTRY)};
#define PW_BACKWARD_ENTRY(k, name) [k] = name##_backward_##k##_chunk,
#define PW_BACKWARD_ENTRIES(name, arity, ...)                                                      \
    [PW_OP_##name] = {PW_EACH_OPERAND(arity, PW_BACKWARD_ENTRY, name)},
static const cpu_chunk_fn backward_chunks[PW_OP_COUNT][PW_MAX_ARITY] = {
    POINTWISE_OPS(PW_BACKWARD_ENTRIES)};

int cpu_pointwise_forward(backend *be, pw_op op, const op_params *p, const tensor *const *x,
                          tensor *y, round_stats *st)
{
    (void)be;
    pw_call c = {.p = *p, .out = y};
    for (int k = 0; k < pw_rows[op].arity; k++)
        c.x[k] = x[k];
    c.v = bcast_view_of(y, c.x, pw_rows[op].arity);
    cpu_parallel_chunks(y->numel, forward_chunks[op], &c, st);
    return 0;
}

int cpu_pointwise_backward(backend *be, pw_op op, const op_params *p, int k, const tensor *dy,
                           const tensor *const *x, const tensor *y, tensor *dx, round_stats *st)
{
    (void)be;
    pw_call c = {.dy = dy, .y = y, .p = *p, .out = dx};
    for (int j = 0; j < pw_rows[op].arity; j++)
        c.x[j] = x[j];
    c.v = bcast_view_of(dy, c.x, pw_rows[op].arity);
    cpu_parallel_chunks(dx->numel, backward_chunks[op][k], &c, st);
    return 0;
}
