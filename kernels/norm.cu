/*
 * norm.cu: layer_norm's, rms_norm's and group_norm's forward and backward (twin of
 * harness/ops/cpu/norm.c, with the same formulas and rounding points), over x viewed as [n, groups,
 * cpg, inner] (backend.h's norm_geom). The forward and the input gradient run one block per row
 * (one (n, group)); each thread keeps a float32 Welford state (or float32 sums) over its strided
 * elements, merged across the block as PyTorch's WelfordOps combine does, so the statistics
 * differ from the CPU's sequential ones only in the order of float32 operations. dw runs
 * one thread per channel.
 */
#include "cuda.cuh"

struct welford {
    float mean, m2, n;
};

static __device__ inline welford welford_combine(welford a, welford b)
{
    if (a.n == 0.0f)
        return b;
    if (b.n == 0.0f)
        return a;
    float n = a.n + b.n, d = b.mean - a.mean, f = b.n / n;
    return welford{a.mean + d * f, a.m2 + b.m2 + d * d * a.n * f, n};
}

/* every thread calls it; the block's state is returned to every thread */
static __device__ welford block_welford(welford v)
{
    __shared__ welford part[CUDA_THREADS / 32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int off = 16; off > 0; off >>= 1) {
        welford o{__shfl_down_sync(0xffffffffu, v.mean, off),
                  __shfl_down_sync(0xffffffffu, v.m2, off),
                  __shfl_down_sync(0xffffffffu, v.n, off)};
        v = welford_combine(v, o);
    }
    __syncthreads();
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    v = part[0];
    for (int w = 1; w < (int)(blockDim.x >> 5); w++)
        v = welford_combine(v, part[w]);
    return v;
}

static __device__ inline int64_t norm_channel(const norm_geom &g, int64_t r, int64_t j)
{
    return r % g.groups * g.cpg + j / g.inner;
}

static __device__ inline float weight_at(const void *w, dtype dt, int64_t c)
{
    return w ? load_as_float(w, dt, c) : 1.0f;
}

struct norm_args {
    norm_geom g;
    const void *x, *w, *b, *dy, *mean, *rstd;
    dtype x_dt, w_dt, b_dt, dy_dt, mean_dt, rstd_dt, out_dt;
    void *out, *mean_out, *rstd_out;
};

__global__ void norm_forward_kernel(norm_args a, dev_stats *out)
{
    __shared__ block_tally sh;
    tally t;
    tally_begin(&t, &sh, out, a.out_dt);
    const norm_geom &g = a.g;
    int64_t rows = g.n * g.groups, cols = g.cpg * g.inner;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t base = r * cols;
        welford s{0.0f, 0.0f, 0.0f};
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
            float v = load_as_float(a.x, a.x_dt, base + j);
            if (g.form == NORM_RMS) { /* the sum of squares (cuWelfordOnlineSum's rms_norm) */
                s.m2 += v * v;
                continue;
            }
            s.n += 1.0f;
            float d = v - s.mean;
            s.mean += d / s.n;
            s.m2 += d * (v - s.mean);
        }
        if (g.form == NORM_RMS)
            s.m2 = block_reduce(s.m2, sum_op());
        else
            s = block_welford(s);
        float var = s.m2 / (float)cols; /* rms_norm: the mean of the squares */
        /* every thread rounds the same values; thread 0 stores them */
        float ms = a.mean_out ? round_to(s.mean, a.mean_dt) : 0.0f,
              rs = round_to(1.0f / sqrtf(var + g.eps), a.rstd_dt);
        if (threadIdx.x == 0) {
            if (a.mean_out)
                store_from_float(a.mean_out, a.mean_dt, r, s.mean);
            store_from_float(a.rstd_out, a.rstd_dt, r, 1.0f / sqrtf(var + g.eps));
        }
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
            int64_t ch = norm_channel(g, r, j);
            float v = load_as_float(a.x, a.x_dt, base + j);
            float w = weight_at(a.w, a.w_dt, ch), b = a.b ? load_as_float(a.b, a.b_dt, ch) : 0.0f;
            float y = 0.0f;
            switch (g.form) {
            case NORM_CENTERED:
                y = (v - ms) * rs * w + b;
                break;
            case NORM_FUSED: {
                float sc = rs * w;
                y = v * sc + (b - sc * ms);
                break;
            }
            case NORM_RMS:
                y = w * (rs * v);
                break;
            }
            tally_store(&t, a.out, a.out_dt, base + j, y);
        }
    }
    tally_flush(&t);
}

/* rms_norm's dx for row r, as layer_norm_grad_input_kernel's rms_norm branch: s2 = sum of
 * dy w x rstd over the row, dx = (cols w dy - x rstd s2) (rstd / cols) */
static __device__ void rms_backward_input_row(const norm_args &a, tally *t, int64_t r, float rs)
{
    const norm_geom &g = a.g;
    int64_t cols = g.cpg * g.inner, base = r * cols;
    float s2 = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
        s2 += load_as_float(a.dy, a.dy_dt, base + j) *
              weight_at(a.w, a.w_dt, norm_channel(g, r, j)) * load_as_float(a.x, a.x_dt, base + j) *
              rs;
    s2 = block_reduce(s2, sum_op());
    float fh = (float)cols, term1 = 1.0f / fh * rs;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        float x = load_as_float(a.x, a.x_dt, base + j);
        float f = fh * weight_at(a.w, a.w_dt, norm_channel(g, r, j)) *
                  load_as_float(a.dy, a.dy_dt, base + j);
        f -= x * rs * s2;
        tally_store(t, a.out, a.out_dt, base + j, f * term1);
    }
}

__global__ void norm_backward_input_kernel(norm_args a, dev_stats *out)
{
    __shared__ block_tally sh;
    tally t;
    tally_begin(&t, &sh, out, a.out_dt);
    const norm_geom &g = a.g;
    int64_t rows = g.n * g.groups, cols = g.cpg * g.inner;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t base = r * cols;
        float rs = load_as_float(a.rstd, a.rstd_dt, r);
        if (g.form == NORM_RMS) {
            rms_backward_input_row(a, &t, r, rs);
            continue;
        }
        float m = load_as_float(a.mean, a.mean_dt, r);
        float s1 = 0.0f, s2 = 0.0f;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
            float wdy = weight_at(a.w, a.w_dt, norm_channel(g, r, j)) *
                        load_as_float(a.dy, a.dy_dt, base + j);
            float xhat = (load_as_float(a.x, a.x_dt, base + j) - m) * rs;
            s1 += wdy;
            s2 += wdy * xhat;
        }
        s1 = block_reduce(s1, sum_op());
        s2 = block_reduce(s2, sum_op());
        float inv_n = 1.0f / (float)cols;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
            float wdy = weight_at(a.w, a.w_dt, norm_channel(g, r, j)) *
                        load_as_float(a.dy, a.dy_dt, base + j);
            float xhat = (load_as_float(a.x, a.x_dt, base + j) - m) * rs;
            tally_store(&t, a.out, a.out_dt, base + j,
                        rs * (wdy - s1 * inv_n - xhat * (s2 * inv_n)));
        }
    }
    tally_flush(&t);
}

/* dw[ch]: one thread's float32 sum over n and inner, in the CPU's order */
struct norm_weight_grad_op {
    norm_args a;
    __device__ float operator()(int64_t ch) const
    {
        const norm_geom &g = a.g;
        int64_t grp = ch / g.cpg, k = ch % g.cpg, cols = g.cpg * g.inner;
        float acc = 0.0f;
        for (int64_t s = 0; s < g.n; s++) {
            int64_t r = s * g.groups + grp;
            float m = a.mean ? load_as_float(a.mean, a.mean_dt, r) : 0.0f,
                  rs = load_as_float(a.rstd, a.rstd_dt, r);
            for (int64_t i = 0; i < g.inner; i++) {
                int64_t at = r * cols + k * g.inner + i;
                float dyv = load_as_float(a.dy, a.dy_dt, at), xv = load_as_float(a.x, a.x_dt, at);
                acc += g.form == NORM_RMS ? dyv * xv * rs : dyv * ((xv - m) * rs);
            }
        }
        return acc;
    }
};

static int row_blocks(const cuda_ctx *c, int64_t rows)
{
    return rows < 1 ? 1 : rows < c->max_blocks ? (int)rows : c->max_blocks;
}

int cuda_norm_forward(backend *be, const norm_geom *g, const tensor *x, const tensor *w,
                      const tensor *b, tensor *y, tensor *mean, tensor *rstd, round_stats *st)
{
    cuda_ctx *c = cuda_ctx_of(be);
    norm_args a = {};
    a.g = *g;
    a.x = x->data, a.x_dt = x->dtype;
    a.w = w ? w->data : NULL, a.w_dt = w ? w->dtype : x->dtype;
    a.b = b ? b->data : NULL, a.b_dt = b ? b->dtype : x->dtype;
    a.out = y->data, a.out_dt = y->dtype;
    a.mean_out = mean ? mean->data : NULL, a.mean_dt = mean ? mean->dtype : DTYPE_FLOAT32;
    a.rstd_out = rstd->data, a.rstd_dt = rstd->dtype;
    dev_stats *ds = cuda_stats_begin(be, 0, st);
    norm_forward_kernel<<<row_blocks(c, g->n * g->groups), CUDA_THREADS, 0, c->stream>>>(a, ds);
    LAUNCH_CHECK();
    cuda_stats_end(be, 0, st, y->numel);
    return 0;
}

int cuda_norm_backward_input(backend *be, const norm_geom *g, const tensor *dy, const tensor *x,
                             const tensor *mean, const tensor *rstd, const tensor *w, tensor *dx,
                             round_stats *st)
{
    cuda_ctx *c = cuda_ctx_of(be);
    norm_args a = {};
    a.g = *g;
    a.x = x->data, a.x_dt = x->dtype;
    a.w = w ? w->data : NULL, a.w_dt = w ? w->dtype : x->dtype;
    a.dy = dy->data, a.dy_dt = dy->dtype;
    a.mean = mean ? mean->data : NULL, a.mean_dt = mean ? mean->dtype : DTYPE_FLOAT32;
    a.rstd = rstd->data, a.rstd_dt = rstd->dtype;
    a.out = dx->data, a.out_dt = dx->dtype;
    dev_stats *ds = cuda_stats_begin(be, 0, st);
    norm_backward_input_kernel<<<row_blocks(c, g->n * g->groups), CUDA_THREADS, 0, c->stream>>>(a,
                                                                                                ds);
    LAUNCH_CHECK();
    cuda_stats_end(be, 0, st, dx->numel);
    return 0;
}

int cuda_norm_backward_weight(backend *be, const norm_geom *g, const tensor *dy, const tensor *x,
                              const tensor *mean, const tensor *rstd, tensor *dw, round_stats *st)
{
    norm_args a = {};
    a.g = *g;
    a.x = x->data, a.x_dt = x->dtype;
    a.dy = dy->data, a.dy_dt = dy->dtype;
    a.mean = mean ? mean->data : NULL, a.mean_dt = mean ? mean->dtype : DTYPE_FLOAT32;
    a.rstd = rstd->data, a.rstd_dt = rstd->dtype;
    launch_store(be, norm_weight_grad_op{a}, dw, st);
    return 0;
}

/* ---- batch_norm: statistics per channel over N and HW (g = {N, C, 1, HW}), one block
 * per channel for the statistics and the backward's sums ---- */
struct bn_args {
    norm_geom g;
    const void *x, *dy, *mean, *invstd, *w, *b;
    dtype x_dt, dy_dt, mean_dt, invstd_dt, w_dt, b_dt, out_dt;
    void *out;
};

static __device__ inline int64_t bn_at(const norm_geom &g, int64_t n, int64_t ch, int64_t i)
{
    return (n * g.groups + ch) * g.inner + i;
}

/* mean and invstd into their tensors; the running stats' new values (float32) into rm, rv */
__global__ void bn_stats_kernel(norm_geom g, const void *x, dtype x_dt, float momentum, void *mean,
                                dtype mean_dt, void *invstd, dtype invstd_dt, const void *run_mean,
                                const void *run_var, dtype run_dt, float *rm, float *rv)
{
    int64_t count = g.n * g.inner;
    for (int64_t ch = blockIdx.x; ch < g.groups; ch += gridDim.x) {
        welford s{0.0f, 0.0f, 0.0f};
        for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
            float v = load_as_float(x, x_dt, bn_at(g, j / g.inner, ch, j % g.inner));
            s.n += 1.0f;
            float d = v - s.mean;
            s.mean += d / s.n;
            s.m2 += d * (v - s.mean);
        }
        s = block_welford(s);
        if (threadIdx.x == 0) {
            float var = s.m2 / (float)count, unbiased = s.m2 / (float)(count - 1);
            store_from_float(mean, mean_dt, ch, s.mean);
            store_from_float(invstd, invstd_dt, ch, 1.0f / sqrtf(var + g.eps));
            rm[ch] = momentum * s.mean + (1.0f - momentum) * load_as_float(run_mean, run_dt, ch);
            rv[ch] = momentum * unbiased + (1.0f - momentum) * load_as_float(run_var, run_dt, ch);
        }
    }
}

int cuda_batch_norm_stats(backend *be, const norm_geom *g, const tensor *x, float momentum,
                          tensor *mean, tensor *invstd, tensor *running_mean, tensor *running_var,
                          round_stats *st_mean, round_stats *st_var)
{
    cuda_ctx *c = cuda_ctx_of(be);
    int64_t bytes = 2 * g->groups * (int64_t)sizeof(float);
    float *rm = (float *)cuda_scratch_alloc(be, bytes);
    if (!rm)
        return -1;
    float *rv = rm + g->groups;
    bn_stats_kernel<<<row_blocks(c, g->groups), CUDA_THREADS, 0, c->stream>>>(
        *g, x->data, x->dtype, momentum, mean->data, mean->dtype, invstd->data, invstd->dtype,
        running_mean->data, running_var->data, running_mean->dtype, rm, rv);
    LAUNCH_CHECK();
    /* the running stats rounded in place from the new values: one counted store each */
    launch_store(be, f32_op{rm}, running_mean, st_mean);
    launch_store(be, f32_op{rv}, running_var, st_var);
    cuda_scratch_free(be, rm, bytes);
    return 0;
}

struct bn_forward_op {
    bn_args a;
    __device__ float operator()(int64_t i) const
    {
        int64_t ch = i / a.g.inner % a.g.groups;
        float m = load_as_float(a.mean, a.mean_dt, ch),
              is = load_as_float(a.invstd, a.invstd_dt, ch);
        float w = weight_at(a.w, a.w_dt, ch), b = a.b ? load_as_float(a.b, a.b_dt, ch) : 0.0f;
        return w * (load_as_float(a.x, a.x_dt, i) - m) * is + b;
    }
};

int cuda_batch_norm_forward(backend *be, const norm_geom *g, const tensor *x, const tensor *mean,
                            const tensor *invstd, const tensor *w, const tensor *b, tensor *y,
                            round_stats *st)
{
    bn_args a = {};
    a.g = *g;
    a.x = x->data, a.x_dt = x->dtype;
    a.mean = mean ? mean->data : NULL, a.mean_dt = mean ? mean->dtype : DTYPE_FLOAT32;
    a.invstd = invstd->data, a.invstd_dt = invstd->dtype;
    a.w = w ? w->data : NULL, a.w_dt = w ? w->dtype : x->dtype;
    a.b = b ? b->data : NULL, a.b_dt = b ? b->dtype : x->dtype;
    launch_store(be, bn_forward_op{a}, y, st);
    return 0;
}

/* per channel: sum(dy) into sums[ch], sum(dy (x - mean)) into sums[C + ch] */
__global__ void bn_sums_kernel(bn_args a, float *sums)
{
    const norm_geom &g = a.g;
    int64_t count = g.n * g.inner;
    for (int64_t ch = blockIdx.x; ch < g.groups; ch += gridDim.x) {
        float m = load_as_float(a.mean, a.mean_dt, ch), s = 0.0f, d = 0.0f;
        for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
            int64_t at = bn_at(g, j / g.inner, ch, j % g.inner);
            float v = load_as_float(a.dy, a.dy_dt, at);
            s += v;
            d += v * (load_as_float(a.x, a.x_dt, at) - m);
        }
        s = block_reduce(s, sum_op());
        d = block_reduce(d, sum_op());
        if (threadIdx.x == 0) {
            sums[ch] = s;
            sums[g.groups + ch] = d;
        }
    }
}

static float *bn_sums(backend *be, const bn_args &a, int64_t *bytes)
{
    cuda_ctx *c = cuda_ctx_of(be);
    *bytes = 2 * a.g.groups * (int64_t)sizeof(float);
    float *sums = (float *)cuda_scratch_alloc(be, *bytes);
    if (!sums)
        return NULL;
    bn_sums_kernel<<<row_blocks(c, a.g.groups), CUDA_THREADS, 0, c->stream>>>(a, sums);
    LAUNCH_CHECK();
    return sums;
}

/* batch_norm_backward_kernel's form: (dy - proj - grad_mean) * grad_scale */
struct bn_grad_input_op {
    bn_args a;
    const float *sums;
    __device__ float operator()(int64_t i) const
    {
        int64_t ch = i / a.g.inner % a.g.groups;
        float count = (float)(a.g.n * a.g.inner);
        float m = load_as_float(a.mean, a.mean_dt, ch),
              is = load_as_float(a.invstd, a.invstd_dt, ch);
        float grad_mean = sums[ch] / count, proj_scale = sums[a.g.groups + ch] / count * is * is;
        float grad_scale = is * weight_at(a.w, a.w_dt, ch);
        float proj = (load_as_float(a.x, a.x_dt, i) - m) * proj_scale;
        return (load_as_float(a.dy, a.dy_dt, i) - proj - grad_mean) * grad_scale;
    }
};

struct bn_grad_weight_op {
    const float *dot;
    const void *invstd;
    dtype invstd_dt;
    __device__ float operator()(int64_t ch) const
    {
        return dot[ch] * load_as_float(invstd, invstd_dt, ch);
    }
};

static bn_args bn_grad_args(const norm_geom *g, const tensor *dy, const tensor *x,
                            const tensor *mean, const tensor *invstd, const tensor *w)
{
    bn_args a = {};
    a.g = *g;
    a.x = x->data, a.x_dt = x->dtype;
    a.dy = dy->data, a.dy_dt = dy->dtype;
    a.mean = mean ? mean->data : NULL, a.mean_dt = mean ? mean->dtype : DTYPE_FLOAT32;
    a.invstd = invstd->data, a.invstd_dt = invstd->dtype;
    a.w = w ? w->data : NULL, a.w_dt = w ? w->dtype : x->dtype;
    return a;
}

int cuda_batch_norm_backward_input(backend *be, const norm_geom *g, const tensor *dy,
                                   const tensor *x, const tensor *mean, const tensor *invstd,
                                   const tensor *w, tensor *dx, round_stats *st)
{
    bn_args a = bn_grad_args(g, dy, x, mean, invstd, w);
    int64_t bytes;
    float *sums = bn_sums(be, a, &bytes);
    if (!sums)
        return -1;
    launch_store(be, bn_grad_input_op{a, sums}, dx, st);
    cuda_scratch_free(be, sums, bytes);
    return 0;
}

int cuda_batch_norm_backward_weight(backend *be, const norm_geom *g, const tensor *dy,
                                    const tensor *x, const tensor *mean, const tensor *invstd,
                                    tensor *dw, round_stats *st)
{
    bn_args a = bn_grad_args(g, dy, x, mean, invstd, NULL);
    int64_t bytes;
    float *sums = bn_sums(be, a, &bytes);
    if (!sums)
        return -1;
    launch_store(be, bn_grad_weight_op{sums + g->groups, invstd->data, invstd->dtype}, dw, st);
    cuda_scratch_free(be, sums, bytes);
    return 0;
}

/* ---- batch_norm in eval mode: the running stats, read and not updated ---- */
__global__ void bn_eval_stats_kernel(norm_geom g, const void *run_mean, const void *run_var,
                                     dtype run_dt, void *mean, dtype mean_dt, void *invstd,
                                     dtype invstd_dt)
{
    for (int64_t ch = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; ch < g.groups;
         ch += (int64_t)gridDim.x * blockDim.x) {
        float v = load_as_float(run_var, run_dt, ch);
        store_from_float(mean, mean_dt, ch, load_as_float(run_mean, run_dt, ch));
        store_from_float(invstd, invstd_dt, ch, 1.0f / sqrtf(v + g.eps));
    }
}

int cuda_batch_norm_eval_stats(backend *be, const norm_geom *g, const tensor *running_mean,
                               const tensor *running_var, tensor *mean, tensor *invstd)
{
    cuda_ctx *c = cuda_ctx_of(be);
    bn_eval_stats_kernel<<<row_blocks(c, (g->groups + CUDA_THREADS - 1) / CUDA_THREADS),
                           CUDA_THREADS, 0, c->stream>>>(
        *g, running_mean->data, running_var->data, running_mean->dtype, mean->data, mean->dtype,
        invstd->data, invstd->dtype);
    LAUNCH_CHECK();
    return 0;
}

/* batch_norm_backward_kernel's eval branch: go * grad_scale, grad_scale = invstd * w */
struct bn_grad_input_eval_op {
    bn_args a;
    __device__ float operator()(int64_t i) const
    {
        int64_t ch = i / a.g.inner % a.g.groups;
        float grad_scale = load_as_float(a.invstd, a.invstd_dt, ch) * weight_at(a.w, a.w_dt, ch);
        return load_as_float(a.dy, a.dy_dt, i) * grad_scale;
    }
};

int cuda_batch_norm_backward_eval_input(backend *be, const norm_geom *g, const tensor *dy,
                                        const tensor *invstd, const tensor *w, tensor *dx,
                                        round_stats *st)
{
    bn_args a = bn_grad_args(g, dy, dy, NULL, invstd, w);
    launch_store(be, bn_grad_input_eval_op{a}, dx, st);
    return 0;
}
