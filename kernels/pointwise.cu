/*
 * pointwise.cu: the pointwise rows (ops/pointwise.h), twin of harness/ops/cpu/pointwise.c.
 * One templated functor for a forward (pw_forward_op<Row>) and one for a backward formula
 * (pw_backward_op<Formula>), instantiated for every row and operand from the list: element i
 * reads each operand through its broadcast (ops/broadcast.h's bcast_index), runs the row's
 * formula (pointwise_math.h, the same source the CPU builds) and is stored, rounded and
 * counted, by launch_store.
 */
#include "cuda.cuh"
#include "ops/broadcast.h"

/* the operands of a call (the saved ones in a backward; NULL where none) and their view */
struct pw_operands {
    const void *data[PW_MAX_ARITY];
    dtype dt[PW_MAX_ARITY];
    bcast_view v;
    __device__ float load(int k, int64_t i) const
    {
        return load_as_float(data[k], dt[k], bcast_index(&v, k, i));
    }
};

static pw_operands operands_of(const tensor *out, const tensor *const *x, int arity)
{
    pw_operands o = {};
    const tensor *xs[PW_MAX_ARITY] = {};
    for (int k = 0; k < arity; k++) {
        xs[k] = x[k];
        o.data[k] = x[k] ? x[k]->data : nullptr;
        o.dt[k] = x[k] ? x[k]->dtype : DTYPE_FLOAT32;
    }
    o.v = bcast_view_of(out, xs, arity);
    return o;
}

template <class Row> struct pw_forward_op {
    pw_operands x;
    op_params p;
    dtype dt;
    __device__ float operator()(int64_t i) const { return Row::forward(x, p, i, dt); }
};

template <class Formula> struct pw_backward_op {
    const void *dy, *y;
    dtype dy_dt, y_dt;
    pw_operands x;
    op_params p;
    dtype dt;
    __device__ float operator()(int64_t i) const { return Formula::run(*this, i); }
};

/* operand j of the row at element i (0 past its arity) */
#define PW_ARG(j, arity) ((arity) > (j) ? x.load(j, i) : 0.0f)
#define PW_ROW(name, arity, ...)                                                                   \
    struct pw_row_##name {                                                                         \
        static __device__ float forward(const pw_operands &x, const op_params &p, int64_t i,       \
                                        dtype dt)                                                  \
        {                                                                                          \
            return pw_##name##_forward(PW_ARG(0, arity), PW_ARG(1, arity), PW_ARG(2, arity), &p,   \
                                       i, dt);                                                     \
        }                                                                                          \
    };
POINTWISE_OPS(PW_ROW)

/* the saved operand j at element i (0 where the row does not save it) */
#define PW_SAVED(j, arity, backward)                                                               \
    ((arity) > (j) && ((backward)&PW_SAVES(j)) ? o.x.load(j, i) : 0.0f)
#define PW_FORMULA(k, name, arity, backward)                                                       \
    struct pw_backward_##name##_##k {                                                              \
        template <class Op> static __device__ float run(const Op &o, int64_t i)                    \
        {                                                                                          \
            return pw_##name##_backward_##k(                                                       \
                load_as_float(o.dy, o.dy_dt, i), PW_SAVED(0, arity, backward),                     \
                PW_SAVED(1, arity, backward), PW_SAVED(2, arity, backward),                        \
                ((backward)&PW_SAVE_OUT) ? load_as_float(o.y, o.y_dt, i) : 0.0f, &o.p, i, o.dt);   \
        }                                                                                          \
    };
#define PW_FORMULAS(name, arity, backward, ...)                                                    \
    PW_EACH_OPERAND(arity, PW_FORMULA, name, arity, backward)
POINTWISE_OPS(PW_FORMULAS)

[[noreturn]] static void no_such_row(pw_op op, int k)
{
    fprintf(stderr, "ampscope: pointwise row %d has no operand %d (%s)\n", (int)op, k, __FILE__);
    abort();
}

int cuda_pointwise_forward(backend *be, pw_op op, const op_params *p, const tensor *const *x,
                           tensor *y, round_stats *st)
{
    pw_operands o = operands_of(y, x, pw_rows[op].arity);
    switch (op) {
#define PW_FORWARD_CASE(name, ...)                                                                 \
    case PW_OP_##name:                                                                             \
        launch_store(be, pw_forward_op<pw_row_##name>{o, *p, y->dtype}, y, st);                    \
        return 0;
        POINTWISE_OPS(PW_FORWARD_CASE)
    case PW_OP_COUNT:
        break;
    }
    no_such_row(op, 0);
}

int cuda_pointwise_backward(backend *be, pw_op op, const op_params *p, int k, const tensor *dy,
                            const tensor *const *x, const tensor *y, tensor *dx, round_stats *st)
{
    pw_operands o = operands_of(dy, x, pw_rows[op].arity);
    const void *yd = y ? y->data : nullptr;
    dtype ydt = y ? y->dtype : DTYPE_FLOAT32;
    switch (op) {
#define PW_BACKWARD_CASE(j, name)                                                                  \
    case j:                                                                                        \
        launch_store(be,                                                                           \
                     pw_backward_op<pw_backward_##name##_##j>{dy->data, yd, dy->dtype, ydt, o, *p, \
                                                              dx->dtype},                          \
                     dx, st);                                                                      \
        return 0;
#define PW_BACKWARD_CASES(name, arity, ...)                                                        \
    case PW_OP_##name:                                                                             \
        switch (k) {                                                                               \
            PW_EACH_OPERAND(arity, PW_BACKWARD_CASE, name)                                         \
        }                                                                                          \
        break;
        POINTWISE_OPS(PW_BACKWARD_CASES)
    case PW_OP_COUNT:
        break;
    }
    no_such_row(op, k);
}
