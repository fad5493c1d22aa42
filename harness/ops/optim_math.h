/*
 * optim_math.h: one element of an optimizer step, shared by the CPU backend and the CUDA
 * kernels so both round identically.
 *
 * We follow PyTorch 2.x's single-tensor (foreach=False, fused=False) implementations in
 * torch/optim/sgd.py, adam.py and rmsprop.py (AdamW is adam.py's _single_tensor_adam with
 * decoupled_weight_decay=True: torch/optim/adamw.py only sets that flag). Each tensor op
 * there is one CUDA kernel that computes in float32 (opmath) and rounds once when it stores,
 * so here every elementary op ends in R(): a rounding to the state's dtype (identity for
 * float32). Python scalars such as 1 - beta2 are computed in double and reach the kernel as
 * float32; they are prepared once per step in optim_hyper. Dividing by a Python scalar on
 * CUDA multiplies by its float32 reciprocal (BinaryDivTrueKernel.cu, is_cpu_scalar branch).
 * lerp(a, b, w) is a + w * (b - a) for |w| < 0.5, else b - (b - a) * (1 - w) (Lerp.h).
 * (1.13 used mul_/add_ instead of lerp_ for Adam's exp_avg: results may differ by an ulp.)
 */
#ifndef AMPSCOPE_OPTIM_MATH_H
#define AMPSCOPE_OPTIM_MATH_H

#include <math.h>
#include <stdbool.h>

#include "core/half.h"

#define OPTIM_MAX_STATE 3

/*
 * The optimizers, one row each: X(KIND, name, STATES): OPTIM_KIND in the enum, its name in
 * case files and reports, and the numbers of state tensors it can keep per parameter as a
 * bit set (OPTIM_NS(n) for n states; optim_state_count gives one of them, which
 * train/optimizers.c's check confirms at start-up). The enum, both backends' update
 * dispatch (an update built for each kind and state count it can keep: harness/ops/cpu/
 * optim.c, kernels/optim.cu) and the selftest iterate the list. A kind's arithmetic is its
 * case in optim_hyper_at, optim_state_count and optim_update below; its options, defaults
 * and state names are its row in train/optimizers.c.
 */
#define OPTIM_NS(n) (1u << (n))
#define OPTIM_KINDS(X)                                                                             \
    X(SGD, "sgd", OPTIM_NS(0) | OPTIM_NS(1)) /* momentum_buffer when momentum != 0 */             \
    X(ADAM, "adam", OPTIM_NS(2))                                                                   \
    X(RMSPROP, "rmsprop", OPTIM_NS(1) | OPTIM_NS(2) | OPTIM_NS(3))                                \
    X(ADAMW, "adamw", OPTIM_NS(2))

typedef enum optim_kind {
#define OPTIM_ENUM(KIND, NAME, STATES) OPTIM_##KIND,
    OPTIM_KINDS(OPTIM_ENUM)
#undef OPTIM_ENUM
} optim_kind;
#define OPTIM_ONE_MORE(KIND, NAME, STATES) +1
#define OPTIM_KIND_COUNT (0 OPTIM_KINDS(OPTIM_ONE_MORE))

/* The kind's name in case files ("adamw") */
static inline const char *optim_kind_name(optim_kind k)
{
    switch (k) {
#define OPTIM_NAME(KIND, NAME, STATES)                                                             \
    case OPTIM_##KIND:                                                                             \
        return NAME;
        OPTIM_KINDS(OPTIM_NAME)
#undef OPTIM_NAME
    }
    return "?";
}

/* The bit set of state counts the kind can keep (OPTIM_KINDS' STATES) */
static inline unsigned optim_kind_states(optim_kind k)
{
    switch (k) {
#define OPTIM_STATES_OF(KIND, NAME, STATES)                                                        \
    case OPTIM_##KIND:                                                                             \
        return STATES;
        OPTIM_KINDS(OPTIM_STATES_OF)
#undef OPTIM_STATES_OF
    }
    return 0;
}

/* What the case file says (PyTorch's names and defaults). */
typedef struct optim_config {
    optim_kind kind;
    double lr;
    double weight_decay;
    double momentum;     /* sgd, rmsprop */
    double dampening;    /* sgd */
    bool nesterov;       /* sgd */
    double beta1, beta2; /* adam, adamw */
    double eps;          /* adam, adamw, rmsprop */
    double alpha;        /* rmsprop */
    bool centered;       /* rmsprop */
} optim_config;

/* Per-step float32 constants, as the kernels receive them. */
typedef struct optim_hyper {
    int64_t step; /* optimizer steps taken, this one included (1 on the first) */
    float neg_lr; /* -lr (this step's, after the schedule) */
    float weight_decay;
    float decay; /* adamw: 1 - lr * weight_decay, param.mul_'s factor; 1 for the others */
    float momentum;
    float one_minus_dampening;
    float one_minus_beta1, beta2, one_minus_beta2;
    float neg_step_size;             /* adam, adamw: -(lr / (1 - beta1^t)) */
    float inv_bias_correction2_sqrt; /* adam, adamw: 1.0f / float(sqrt(1 - beta2^t)) */
    float eps;
    float alpha, one_minus_alpha;
} optim_hyper;

/* The float32 constants of optimizer step `step` (1 on the first) at learning rate lr, as
 * PyTorch computes them in double on the host and hands them to its kernels. Host only. */
static inline optim_hyper optim_hyper_at(const optim_config *c, double lr, int64_t step)
{
    optim_hyper h = {
        .step = step,
        .neg_lr = (float)-lr,
        .weight_decay = (float)c->weight_decay,
        .decay = 1.0f, /* AdamW's, below */
        .momentum = (float)c->momentum,
        .one_minus_dampening = (float)(1.0 - c->dampening),
        .one_minus_beta1 = (float)(1.0 - c->beta1),
        .beta2 = (float)c->beta2,
        .one_minus_beta2 = (float)(1.0 - c->beta2),
        .neg_step_size = 0.0f, /* Adam's, below */
        .inv_bias_correction2_sqrt = 0.0f,
        .eps = (float)c->eps,
        .alpha = (float)c->alpha,
        .one_minus_alpha = (float)(1.0 - c->alpha),
    };
    switch (c->kind) {
    case OPTIM_SGD:
    case OPTIM_RMSPROP:
        break;
    case OPTIM_ADAM:
    case OPTIM_ADAMW: {
        double bc1 = 1.0 - pow(c->beta1, (double)step), bc2 = 1.0 - pow(c->beta2, (double)step);
        h.neg_step_size = (float)-(lr / bc1);
        h.inv_bias_correction2_sqrt = 1.0f / (float)sqrt(bc2);
        if (c->kind == OPTIM_ADAMW) /* the Python float 1 - lr * weight_decay */
            h.decay = (float)(1.0 - lr * c->weight_decay);
        break;
    }
    }
    return h;
}

/* Number of state tensors (slots of optim_update's s) the optimizer keeps per parameter;
 * their names are optimizers.c's, whose optim_registry_check checks that both agree. */
static inline int optim_state_count(const optim_config *c)
{
    switch (c->kind) {
    case OPTIM_SGD:
        return c->momentum != 0 ? 1 : 0;
    case OPTIM_ADAM:
    case OPTIM_ADAMW:
        return 2;
    case OPTIM_RMSPROP:
        return 1 + (c->momentum > 0) + (c->centered ? 1 : 0);
    }
    return 0;
}

static inline AMP_HD float optim_lerp(float a, float b, float w)
{
    return fabsf(w) < 0.5f ? a + w * (b - a) : b - (b - a) * (1.0f - w);
}

/*
 * One element. p: the parameter (master when master weights are on; in/out), g: its
 * gradient, s: state values (in/out), dt: the dtype of p, g and s. State layout:
 *   sgd:          s[0] momentum_buffer
 *   adam, adamw:  s[0] exp_avg, s[1] exp_avg_sq
 *   rmsprop:      s[0] square_avg, s[1] momentum_buffer (momentum > 0), s[last] grad_avg (centered)
 * Returns u, the increment of the step's last op `p + u` (param.add_ / addcdiv_), before
 * that op rounds: the caller stores round(*p + u) and counts it. *p is the value that op
 * adds to: AdamW's decoupled decay param.mul_(1 - lr * weight_decay) rounds it in place
 * first; the others leave it. optim_meant_change tells whether the step meant to change
 * the element (lost updates).
 */
static inline AMP_HD float optim_update(const optim_config *c, const optim_hyper *h, dtype dt,
                                        float *p, float g, float *s)
{
#define R(x) round_to((x), dt)
    if (c->kind == OPTIM_ADAMW) {
        if (h->weight_decay != 0.0f) /* adam.py: `if weight_decay != 0` */
            *p = R(*p * h->decay);
    } else if (h->weight_decay != 0.0f) { /* L2: grad.add(param, alpha=weight_decay) */
        g = R(g + h->weight_decay * *p);
    }
    switch (c->kind) {
    case OPTIM_SGD:
        if (h->momentum != 0.0f) {
            if (h->step == 1) {
                s[0] = g; /* torch.clone(grad) */
            } else {
                s[0] = R(s[0] * h->momentum);
                s[0] = R(s[0] + h->one_minus_dampening * g);
            }
            g = c->nesterov ? R(g + h->momentum * s[0]) : s[0];
        }
        return h->neg_lr * g;
    case OPTIM_ADAM:
    case OPTIM_ADAMW: {
        s[0] = R(optim_lerp(s[0], g, h->one_minus_beta1));
        s[1] = R(s[1] * h->beta2);
        s[1] = R(s[1] + h->one_minus_beta2 * g * g);
        float denom = R(sqrtf(s[1]));
        denom = R(denom * h->inv_bias_correction2_sqrt);
        denom = R(denom + h->eps);
        return h->neg_step_size * (s[0] / denom);
    }
    case OPTIM_RMSPROP: {
        int ga = 1 + (h->momentum > 0.0f);
        s[0] = R(s[0] * h->alpha);
        s[0] = R(s[0] + h->one_minus_alpha * g * g);
        float avg;
        if (c->centered) {
            s[ga] = R(optim_lerp(s[ga], g, h->one_minus_alpha));
            avg = R(s[0] + -1.0f * s[ga] * s[ga]);
            avg = R(sqrtf(avg));
        } else {
            avg = R(sqrtf(s[0]));
        }
        avg = R(avg + h->eps);
        if (h->momentum > 0.0f) {
            s[1] = R(s[1] * h->momentum);
            s[1] = R(s[1] + g / avg);
            return h->neg_lr * s[1];
        }
        return h->neg_lr * (g / avg);
    }
    }
    return 0.0f;
#undef R
}

/* Whether the step meant to change an element whose parameter was p before it: its last
 * op adds u != 0, or AdamW's decay scales a non-zero p by a factor other than 1 (a decay
 * that rounds back to p is then a lost update too). */
static inline AMP_HD bool optim_meant_change(const optim_hyper *h, float p, float u)
{
    return (u != 0.0f) | ((h->decay != 1.0f) & (p != 0.0f));
}

#endif
