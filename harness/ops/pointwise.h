/*
 * pointwise.h: the pointwise ops, one row each. A row is one line of POINTWISE_OPS below
 * and its formulas in pointwise_math.h (PW_FORWARD(name), PW_BACKWARD(name, k) for each
 * operand k); the C compiler and nvcc build the formulas from that one definition, and
 * everything else is generated from the list: the op enum (pw_op), the row table
 * (pw_rows, pointwise.c), the CPU's loops (cpu/pointwise.c) and the CUDA kernels
 * (kernels/pointwise.cu) behind the backend's two entries pointwise_forward and
 * pointwise_backward, one layer kind per row (layers/pointwise.c; config/kinds.h), the
 * selftest's and the tests' loops, `ampscope ops --json`.
 *
 * A row's columns, X(name, arity, backward, policy, signature, args, opts, aten):
 *  name       the op as a case file names it (`gelu`) and its formulas' names
 *  arity      its operands, 1 to PW_MAX_ARITY (a, b, c); a case may write one operand of a
 *             row of two as a number (a Python scalar: layers/pointwise.c), else Python
 *             scalars are the row's args or options
 *  backward   what its backward keeps, exactly what PyTorch's autograd node saves
 *             (tools/autograd/derivatives.yaml): PW_SAVE_A/B/C (an operand), PW_SAVE_OUT
 *             (the result); and PW_PASS_A/B/C: that operand's gradient is the output's
 *             gradient itself (add's `self: grad`), handed on with no kernel
 *  policy     its CUDA autocast policy (autocast_policy.h)
 *  signature  the words after the name in a case file ("" or "S": upper-case words are
 *             the numbers of `args`, layers/layer.h's signature)
 *  args       (), or its positional numbers: PW_ARG_REAL(name, slot), a Python float read
 *             into layer_spec.opt_real[slot] and op_params.real[slot]
 *  opts       (), or its name=value options: PW_OPT_REAL(name, slot, range, default) (into
 *             opt_real[slot] and real[slot]), PW_OPT_CHOICE(name, slot, default, (words))
 *             (opt_choice[slot] and choice[slot]); the range is layer.h's real_range
 *  aten       the ATen ops it stands for: the first is the one autocast dispatches, the
 *             others its kernels and backward
 * The args and opts columns are read only where layer.h's kind_arg and kind_opt are known
 * (layers/pointwise.c makes them); here they are tokens.
 *
 * Semantics every row shares (PyTorch's TensorIterator ops on CUDA):
 *  - operands broadcast to the output's shape as NumPy does (shapes right-aligned, a dim
 *    of 1 repeats; at most TENSOR_MAX_DIMS dims: broadcast.h);
 *  - the output's dtype is the promotion of the operands' dtypes (a Python scalar does
 *    not promote), after autocast's casts for the row's policy (autograd/autocast.c);
 *  - the formulas compute in float32 "opmath" from the operands' exact values, and the
 *    kernel rounds once into the output's dtype; where PyTorch's kernel rounds between
 *    operations (a backward computing in scalar_t) the formula rounds there itself
 *    (PW_ROUND); a composite backward of several kernels rounds between them (the layer
 *    makes each a tensor);
 *  - a backward formula gives one operand's gradient in the output's shape and in the
 *    dtype of dy and the saved tensors it reads; the layer then sums it to the operand's
 *    shape as autograd's engine does for a broadcast input, and casts it to the operand's
 *    dtype (torch/csrc/autograd/engine.cpp, validate_outputs).
 */
#ifndef AMPSCOPE_POINTWISE_H
#define AMPSCOPE_POINTWISE_H

#include <stdbool.h>
#include <stdint.h>

#include "autocast_policy.h"
#include "op_params.h"

#define PW_MAX_ARITY 3 /* tensor operands of a row */
#define PW_MAX_ATEN 4  /* ATen op names of a row */

/* gelu's approximate= (the order of its choices) */
typedef enum gelu_approximate { GELU_NONE = 0, GELU_TANH } gelu_approximate;

/* the backward column's flags */
enum {
    PW_SAVE_A = 1 << 0,
    PW_SAVE_B = 1 << 1,
    PW_SAVE_C = 1 << 2,
    PW_SAVE_OUT = 1 << 3,
    PW_PASS_A = 1 << 4,
    PW_PASS_B = 1 << 5,
    PW_PASS_C = 1 << 6,
};
#define PW_SAVES(k) (PW_SAVE_A << (k))  /* operand k saved */
#define PW_PASSES(k) (PW_PASS_A << (k)) /* operand k's gradient is dy as it is */

/* X(name, arity, backward, policy, signature, args, opts, aten): see above */
#define POINTWISE_OPS(X)                                                                           \
    /* nn.ReLU; threshold_backward(grad, result, 0) reads the result */                            \
    X(relu, 1, PW_SAVE_OUT, AUTOCAST_NONE, "", (), (), ("relu", "threshold_backward"))             \
    /* nn.GELU(approximate=); gelu_backward(grad, self, approximate) */                            \
    X(gelu, 1, PW_SAVE_A, AUTOCAST_NONE, "", (),                                                   \
      (PW_OPT_CHOICE(approximate, 0, GELU_NONE, ("none", "tanh"))), ("gelu", "gelu_backward"))     \
    /* nn.SiLU; silu_backward(grad, self) */                                                       \
    X(silu, 1, PW_SAVE_A, AUTOCAST_NONE, "", (), (), ("silu", "silu_backward"))                    \
    /* nn.Sigmoid; sigmoid_backward(grad, result) */                                               \
    X(sigmoid, 1, PW_SAVE_OUT, AUTOCAST_NONE, "", (), (), ("sigmoid", "sigmoid_backward"))         \
    /* nn.Tanh; tanh_backward(grad, result) */                                                     \
    X(tanh, 1, PW_SAVE_OUT, AUTOCAST_NONE, "", (), (), ("tanh", "tanh_backward"))                  \
    /* a + b (the residual stream); AddBackward0: self: grad, other: grad (alpha 1) */             \
    X(add, 2, PW_PASS_A | PW_PASS_B, AUTOCAST_NONE, "", (), (), ("add.Tensor"))                    \
    /* a * b (a gate); MulBackward0 saves both: grad * other, grad * self */                       \
    X(mul, 2, PW_SAVE_A | PW_SAVE_B, AUTOCAST_NONE, "", (), (), ("mul.Tensor"))                    \
    /* x * S, S a Python float (attention's q * 0.125); MulBackward1: grad * other */              \
    X(scale, 1, 0, AUTOCAST_NONE, "S", (PW_ARG_REAL(factor, 0)), (), ("mul.Scalar"))               \
    /* nn.Dropout(p) in training mode: x * mask / (1 - p), the mask the harness's own, drawn       \
     * again in backward (PyTorch saves it: a byte per element the harness does not keep) */       \
    X(dropout, 1, 0, AUTOCAST_NONE, "", (), (PW_OPT_REAL(p, 0, UNIT_HALF, 0.5)),                   \
      ("native_dropout", "native_dropout_backward"))                                               \
    /* -x (torch.neg); NegBackward0: grad.neg(), nothing saved */                                  \
    X(neg, 1, 0, AUTOCAST_NONE, "", (), (), ("neg"))                                               \
    /* a - b (torch.sub, alpha 1); SubBackward0: self: grad, other: -grad, nothing saved */        \
    X(sub, 2, PW_PASS_A, AUTOCAST_NONE, "", (), (), ("sub.Tensor"))                                \
    /* a / b (torch.div, true division); DivBackward0: self: grad / other, other:                  \
     * -grad * ((self / other) / other) (FunctionsManual.cpp, div_tensor_*_backward) */            \
    X(div, 2, PW_SAVE_A | PW_SAVE_B, AUTOCAST_NONE, "", (), (), ("div.Tensor"))                     \
    /* torch.maximum, torch.minimum (NaN propagates); MaximumBackward0: where(self == other,       \
     * grad / 2, grad) masked to 0 where the other operand wins */                                 \
    X(maximum, 2, PW_SAVE_A | PW_SAVE_B, AUTOCAST_NONE, "", (), (), ("maximum"))                    \
    X(minimum, 2, PW_SAVE_A | PW_SAVE_B, AUTOCAST_NONE, "", (), (), ("minimum"))                    \
    /* x ** S, S a Python float (torch.pow(x, S), the Tensor_Scalar overload; on the fp32 list);    \
     * PowBackward0: grad * (S * self.pow(S - 1)) (FunctionsManual.cpp, pow_backward) */           \
    X(pow, 1, PW_SAVE_A, AUTOCAST_FP32, "S", (PW_ARG_REAL(exponent, 0)), (),                       \
      ("pow.Tensor_Scalar"))                                                                       \
    /* torch.rsqrt (fp32 list); RsqrtBackward0: -0.5 * grad * result.pow(3) */                     \
    X(rsqrt, 1, PW_SAVE_OUT, AUTOCAST_FP32, "", (), (), ("rsqrt"))                                 \
    /* torch.sqrt; SqrtBackward0: grad / (2 * result) */                                           \
    X(sqrt, 1, PW_SAVE_OUT, AUTOCAST_NONE, "", (), (), ("sqrt"))                                   \
    /* torch.exp (fp32 list); ExpBackward0: grad * result */                                       \
    X(exp, 1, PW_SAVE_OUT, AUTOCAST_FP32, "", (), (), ("exp"))                                     \
    /* torch.log (fp32 list); LogBackward0: grad.div(self) */                                      \
    X(log, 1, PW_SAVE_A, AUTOCAST_FP32, "", (), (), ("log"))                                       \
    /* torch.reciprocal (fp32 list); ReciprocalBackward0: -grad * (result * result) */             \
    X(reciprocal, 1, PW_SAVE_OUT, AUTOCAST_FP32, "", (), (), ("reciprocal"))                       \
    /* torch.abs; AbsBackward0: grad * self.sgn() */                                               \
    X(abs, 1, PW_SAVE_A, AUTOCAST_NONE, "", (), (), ("abs"))                                       \
    /* torch.sin, torch.cos; SinBackward0: grad * self.cos(), CosBackward0: grad * -self.sin() */  \
    X(sin, 1, PW_SAVE_A, AUTOCAST_NONE, "", (), (), ("sin"))                                       \
    X(cos, 1, PW_SAVE_A, AUTOCAST_NONE, "", (), (), ("cos"))                                       \
    /* torch.erf; ErfBackward0: 2.0 / sqrt(M_PI) * exp(-(self.pow(2))) * grad */                   \
    X(erf, 1, PW_SAVE_A, AUTOCAST_NONE, "", (), (), ("erf"))                                       \
    /* nn.Softplus(beta=, threshold=) (fp32 list); softplus_backward(grad, self, beta,             \
     * threshold) */                                                                               \
    X(softplus, 1, PW_SAVE_A, AUTOCAST_FP32, "", (),                                               \
      (PW_OPT_REAL(beta, 0, POSITIVE, 1.0) PW_OPT_REAL(threshold, 1, ANY, 20.0)),                  \
      ("softplus", "softplus_backward"))                                                           \
    /* nn.Hardswish; hardswish_backward(grad, self) */                                             \
    X(hardswish, 1, PW_SAVE_A, AUTOCAST_NONE, "", (), (), ("hardswish", "hardswish_backward"))     \
    /* nn.Hardsigmoid; hardsigmoid_backward(grad, self) */                                         \
    X(hardsigmoid, 1, PW_SAVE_A, AUTOCAST_NONE, "", (), (),                                        \
      ("hardsigmoid", "hardsigmoid_backward"))                                                     \
    /* nn.ReLU6: F.relu6 is ATen's relu6, a composite of hardtanh(self, 0, 6) (a clamp; NaN         \
     * propagates); HardtanhBackward0: hardtanh_backward(grad, self, 0, 6), grad where             \
     * 0 < x < 6, else 0 */                                                                        \
    X(relu6, 1, PW_SAVE_A, AUTOCAST_NONE, "", (), (), ("relu6", "hardtanh", "hardtanh_backward"))

/* PW_EACH_OPERAND(arity, M, ...): M(0, ...) M(1, ...) ... for each operand of a row (the
 * generated code's loop over a row's backward formulas) */
#define PW_EACH_OPERAND_1(M, ...) M(0, __VA_ARGS__)
#define PW_EACH_OPERAND_2(M, ...) PW_EACH_OPERAND_1(M, __VA_ARGS__) M(1, __VA_ARGS__)
#define PW_EACH_OPERAND_3(M, ...) PW_EACH_OPERAND_2(M, __VA_ARGS__) M(2, __VA_ARGS__)
#define PW_EACH_OPERAND(arity, M, ...) PW_EACH_OPERAND_##arity(M, __VA_ARGS__)

/* PW_OP_relu, ...: a row, in the list's order */
typedef enum pw_op {
#define PW_OP_ENUM(name, ...) PW_OP_##name,
    POINTWISE_OPS(PW_OP_ENUM)
#undef PW_OP_ENUM
        PW_OP_COUNT
} pw_op;

/* A row as data (pointwise.c), for the layers, the tests and `ampscope ops`. */
typedef struct pw_row {
    const char *name;
    int arity;
    unsigned backward; /* PW_SAVE_*, PW_PASS_* */
    autocast_policy policy;
    const char *aten[PW_MAX_ATEN]; /* NULL-terminated */
} pw_row;

#ifdef __cplusplus
extern "C" {
#endif
extern const pw_row pw_rows[PW_OP_COUNT];
#ifdef __cplusplus
}
#endif

/* the float32 formulas */
#define PW_REAL float
#define PW_FN(name) name
#include "pointwise_math.h"

#endif
