/*
 * distributed/policy.c: what each communication policy does to a gradient around the
 * all-reduce, as PyTorch's code does it (distributed.h's comm_plan):
 *   ddp            torch/csrc/distributed/c10d/reducer.cpp, Reducer::mark_variable_ready_dense
 *                  with DDP's defaults gradient_as_bucket_view=False and
 *                  batched_grad_copy=False: at::mul_out(bucket_view, grad,
 *                  wrapped_scalar_tensor(1. / div_factor_)), 1/world_size applied while
 *                  copying into the bucket, in the gradient's dtype, before the allreduce
 *                  (SUM) of the bucket. (gradient_as_bucket_view=True, once .grad is a view
 *                  of the bucket, divides it in place, bucket_view.div_(div_factor_);
 *                  batched_grad_copy=True copies with _foreach_copy_ and divides the flat
 *                  bucket with div_: a division, which can round otherwise than the multiply
 *                  by the rounded 1/world_size when world_size is not a power of two.)
 *                  Under no_sync (accumulation) the hooks fire in the last micro-batch's
 *                  backward, on .grad holding the sum AccumulateGrad made
 *   fp16_compress  torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py:
 *                  buffer.to(torch.float16).div_(world_size), allreduce, copy_ back
 *   bf16_compress  the same file: the same in torch.bfloat16
 *   fsdp           torch/distributed/fsdp/_init_utils.py, _runtime_utils.py (_div_if_needed)
 *                  and algorithms/_comm_hooks/default_hooks.py
 *                  (DefaultState._get_gradient_predivide_factor): in reduce_dtype, div_ by
 *                  the predivide factor, reduce-scatter (SUM), div_ by world_size / factor
 *                  (_div_if_needed: only factors > 1), cast to the parameter's dtype
 *   fsdp2          torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py
 *                  (_get_gradient_divide_factors): float16 as FSDP1; float32 and bfloat16
 *                  ReduceOp.AVG, which NCCL runs as PreMulSum by 1/world_size for floating
 *                  types (NCCL's enqueue.cc, hostToDevRedOp): each contribution multiplied
 *                  in the dtype, then summed
 * Divisions by a Python number compute in float (opmath) and round once into the tensor's
 * dtype, as TensorIterator's half kernels do; so does a pairwise add of two halves
 * (c10/util/Half-inl.h, BFloat16-inl.h: operator+ through float).
 */
#include "distributed.h"

#include "core/half.h"

const char *const comm_policy_names[COMM_POLICY_COUNT] = {"ddp", "fp16_compress", "bf16_compress",
                                                          "fsdp", "fsdp2"};

double distributed_predivide_factor(int64_t world_size)
{
    /* _get_gradient_predivide_factor(world_size):
     *   factor = 1
     *   while world_size % factor == 0 and world_size / factor > factor: factor *= 2 */
    int64_t factor = 1;
    while (world_size % factor == 0 && (double)world_size / (double)factor > (double)factor)
        factor *= 2;
    return (double)factor;
}

comm_plan distributed_plan(comm_policy p, dtype grad, dtype reduce_dtype, int64_t world_size)
{
    double n = (double)world_size, pre = distributed_predivide_factor(world_size);
    switch (p) {
    case COMM_DDP:
        return (comm_plan){.wire = grad, .premul = 1.0 / n, .prediv = 1, .postdiv = 1};
    case COMM_FP16_COMPRESS:
        return (comm_plan){.wire = DTYPE_FLOAT16, .premul = 1, .prediv = n, .postdiv = 1};
    case COMM_BF16_COMPRESS:
        return (comm_plan){.wire = DTYPE_BFLOAT16, .premul = 1, .prediv = n, .postdiv = 1};
    case COMM_FSDP:
        return (comm_plan){.wire = reduce_dtype, .premul = 1, .prediv = pre, .postdiv = n / pre};
    case COMM_FSDP2:
        if (reduce_dtype == DTYPE_FLOAT16)
            return (comm_plan){.wire = reduce_dtype, .premul = 1, .prediv = pre,
                               .postdiv = n / pre};
        return (comm_plan){.wire = reduce_dtype, .premul = 1.0 / n, .prediv = 1, .postdiv = 1};
    case COMM_POLICY_COUNT:
        break;
    }
    return (comm_plan){.wire = DTYPE_COUNT};
}

void distributed_contribution(const comm_plan *plan, const float *g, float *wire, int64_t n)
{
    float premul = (float)plan->premul, prediv = (float)plan->prediv;
    for (int64_t i = 0; i < n; i++) {
        float v = round_to(g[i], plan->wire); /* .to(wire) */
        if (plan->premul != 1)
            v = round_to(v * premul, plan->wire);
        if (plan->prediv > 1)
            v = round_to(v / prediv, plan->wire);
        wire[i] = v;
    }
}

void distributed_finish(const comm_plan *plan, dtype grad, float *v, int64_t n)
{
    float postdiv = (float)plan->postdiv;
    for (int64_t i = 0; i < n; i++) {
        float x = v[i];
        if (plan->postdiv > 1)
            x = round_to(x / postdiv, plan->wire);
        v[i] = round_to(x, grad); /* copy_ back into .grad */
    }
}

float distributed_add(float a, float b, dtype dt) { return round_to(a + b, dt); }
