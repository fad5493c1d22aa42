/*
 * conv2d.c: 2-d convolution on the CPU by im2col + OpenBLAS sgemm, one sample at a time
 * (twin of kernels/conv2d.cu, which uses cuDNN). Layout NCHW; weight [C_out, C_in / groups,
 * KH, KW]; with groups > 1 one GEMM per group, on the group's rows of the column matrix and
 * of the weight and output (depthwise: groups = C_in = C_out). Operands of any float dtype are
 * widened to exact float32, products are accumulated in float32, and each output is rounded once
 * into its dtype. A column matrix holds one sample: [C_in*KH*KW, H_out*W_out], group i's rows [i*K,
 * (i+1)*K), K = C_in/groups*KH*KW. A half weight's widened copy is made once per step: the forward
 * holds it for the input gradient (cpu_hold, cpu_take: cpu.h).
 */
#include <cblas.h>
#include <string.h>

#include "cpu.h"

/* the column matrix of one sample, its rows (c, ki, kj) shared among the threads */
static void im2col(const conv2d_geom *g, const float *x, float *col)
{
    int64_t hw = g->h_out * g->w_out, rows = g->c_in * g->kh * g->kw;
#pragma omp parallel for schedule(static) if (rows * hw >= (1 << 16))
    for (int64_t r = 0; r < rows; r++) {
        int64_t c = r / (g->kh * g->kw), ki = r / g->kw % g->kh, kj = r % g->kw;
        /* the output columns whose input column lies inside: ow in [lo, hi) */
        int64_t shift = kj * g->dilation - g->padding, lo = 0, hi = g->w_out;
        while (lo < hi && lo * g->stride + shift < 0)
            lo++;
        while (hi > lo && (hi - 1) * g->stride + shift >= g->w_in)
            hi--;
        for (int64_t oh = 0; oh < g->h_out; oh++) {
            int64_t ih = oh * g->stride - g->padding + ki * g->dilation;
            float *out = col + r * hw + oh * g->w_out;
            if (ih < 0 || ih >= g->h_in) {
                memset(out, 0, sizeof(float) * (size_t)g->w_out);
                continue;
            }
            const float *in = x + (c * g->h_in + ih) * g->w_in;
            for (int64_t ow = 0; ow < lo; ow++)
                out[ow] = 0.0f;
            for (int64_t ow = lo; ow < hi; ow++)
                out[ow] = in[ow * g->stride + shift];
            for (int64_t ow = hi; ow < g->w_out; ow++)
                out[ow] = 0.0f;
        }
    }
}

static void col2im(const conv2d_geom *g, const float *col, float *x)
{
    int64_t hw = g->h_out * g->w_out;
    memset(x, 0, sizeof(float) * (size_t)(g->c_in * g->h_in * g->w_in));
    for (int64_t c = 0; c < g->c_in; c++)
        for (int64_t ki = 0; ki < g->kh; ki++)
            for (int64_t kj = 0; kj < g->kw; kj++) {
                const float *row = col + ((c * g->kh + ki) * g->kw + kj) * hw;
                for (int64_t oh = 0; oh < g->h_out; oh++) {
                    int64_t ih = oh * g->stride - g->padding + ki * g->dilation;
                    if (ih < 0 || ih >= g->h_in)
                        continue;
                    for (int64_t ow = 0; ow < g->w_out; ow++) {
                        int64_t iw = ow * g->stride - g->padding + kj * g->dilation;
                        if (iw >= 0 && iw < g->w_in)
                            x[(c * g->h_in + ih) * g->w_in + iw] += row[oh * g->w_out + ow];
                    }
                }
            }
}

/* one sample of t (any float dtype) widened into dst, on every thread */
static void load_sample(const tensor *t, int64_t sample, int64_t per_sample, float *dst)
{
    int64_t chunks = (per_sample + CPU_CHUNK - 1) / CPU_CHUNK;
#pragma omp parallel for schedule(static) if (per_sample >= (1 << 16))
    for (int64_t c = 0; c < chunks; c++) {
        int64_t off = c * CPU_CHUNK,
                n = per_sample - off < CPU_CHUNK ? per_sample - off : CPU_CHUNK;
        cpu_load(t, sample * per_sample + off, n, dst + off);
    }
}

/* one sample's output rounded into y: its sums plus each channel's bias */
typedef struct bias_store_ctx {
    const float *sums, *bias; /* [C_out, HW], [C_out] */
    int64_t hw, y_off;
    tensor *y;
} bias_store_ctx;

static void bias_store_chunk(void *p, int64_t off, int64_t n, round_stats *st)
{
    const bias_store_ctx *c = p;
    float buf[CPU_CHUNK];
    for (int64_t j = off; j < off + n;) { /* a channel's run at a time */
        int64_t ch = j / c->hw, end = (ch + 1) * c->hw < off + n ? (ch + 1) * c->hw : off + n;
        for (; j < end; j++)
            buf[j - off] = c->sums[j] + c->bias[ch];
    }
    cpu_store(buf, c->y->data, c->y->dtype, c->y_off + off, n, st);
}

int cpu_conv2d_forward(backend *be, const conv2d_geom *g, const tensor *x, const tensor *w,
                       const tensor *b, tensor *y, round_stats *st)
{
    int64_t k = g->c_in * g->kh * g->kw, hw = g->h_out * g->w_out;
    int64_t kg = k / g->groups, og = g->c_out / g->groups; /* one group's K and C_out */
    int64_t x_per = g->c_in * g->h_in * g->w_in, y_per = g->c_out * hw;
    float *w_own, *b_own = NULL;
    const float *wf = cpu_as_f32(be, w, &w_own), *bf = wf && b ? cpu_as_f32(be, b, &b_own) : NULL;
    float *xs = cpu_scratch(be, x_per), *col = cpu_scratch(be, k * hw),
          *out = cpu_scratch(be, y_per);
    int rc = (wf && (bf || !b) && xs && col && out) ? 0 : -1;
    for (int64_t s = 0; rc == 0 && s < g->n; s++) {
        load_sample(x, s, x_per, xs);
        im2col(g, xs, col);
        for (int64_t gi = 0; gi < g->groups; gi++) /* out[og, HW] = w[og, kg] col[kg, HW] */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)og, (blasint)hw,
                        (blasint)kg, 1.0f, wf + gi * og * kg, (blasint)kg, col + gi * kg * hw,
                        (blasint)hw, 0.0f, out + gi * og * hw, (blasint)hw);
        /* the bias joins the float32 sums in the rounding pass: the same single rounding of
         * sum + bias as starting the accumulators from it (PyTorch's slow_conv2d), up to
         * the order of float32 additions when OpenBLAS splits a long sum */
        if (bf) {
            bias_store_ctx c = {out, bf, hw, s * y_per, y};
            cpu_parallel_chunks(y_per, bias_store_chunk, &c, st);
        } else {
            cpu_store_parallel(out, y->data, y->dtype, s * y_per, y_per, st);
        }
    }
    cpu_scratch_free(be, out, y_per);
    cpu_scratch_free(be, col, k * hw);
    cpu_scratch_free(be, xs, x_per);
    cpu_scratch_free(be, b_own, b ? b->numel : 0);
    if (w_own && rc == 0 && x->requires_grad) /* for the input gradient's GEMM, as linear.c */
        cpu_hold(be, w, w_own);
    else
        cpu_scratch_free(be, w_own, w->numel);
    return rc;
}

int cpu_conv2d_backward_input(backend *be, const conv2d_geom *g, const tensor *dy, const tensor *w,
                              tensor *dx, round_stats *st)
{
    int64_t k = g->c_in * g->kh * g->kw, hw = g->h_out * g->w_out;
    int64_t kg = k / g->groups, og = g->c_out / g->groups;
    int64_t x_per = g->c_in * g->h_in * g->w_in, y_per = g->c_out * hw;
    float *w_own = cpu_take(be, w); /* the forward's copy, when it held one */
    const float *wf = w_own ? w_own : cpu_as_f32(be, w, &w_own);
    float *dys = cpu_scratch(be, y_per), *col = cpu_scratch(be, k * hw),
          *dxs = cpu_scratch(be, x_per);
    int rc = (wf && dys && col && dxs) ? 0 : -1;
    for (int64_t s = 0; rc == 0 && s < g->n; s++) {
        load_sample(dy, s, y_per, dys);
        for (int64_t gi = 0; gi < g->groups; gi++) /* dcol[kg, HW] = w[og, kg]^T dy[og, HW] */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (blasint)kg, (blasint)hw,
                        (blasint)og, 1.0f, wf + gi * og * kg, (blasint)kg, dys + gi * og * hw,
                        (blasint)hw, 0.0f, col + gi * kg * hw, (blasint)hw);
        col2im(g, col, dxs);
        cpu_store_parallel(dxs, dx->data, dx->dtype, s * x_per, x_per, st);
    }
    cpu_scratch_free(be, dxs, x_per);
    cpu_scratch_free(be, col, k * hw);
    cpu_scratch_free(be, dys, y_per);
    cpu_scratch_free(be, w_own, w->numel);
    return rc;
}

int cpu_conv2d_backward_weight(backend *be, const conv2d_geom *g, const tensor *dy, const tensor *x,
                               tensor *dw, round_stats *st)
{
    int64_t k = g->c_in * g->kh * g->kw, hw = g->h_out * g->w_out;
    int64_t kg = k / g->groups, og = g->c_out / g->groups, nw = g->c_out * kg;
    int64_t x_per = g->c_in * g->h_in * g->w_in, y_per = g->c_out * hw;
    float *xs = cpu_scratch(be, x_per), *col = cpu_scratch(be, k * hw);
    float *dys = cpu_scratch(be, y_per), *acc = cpu_scratch(be, nw);
    int rc = (xs && col && dys && acc) ? 0 : -1;
    if (rc == 0)
        memset(acc, 0, sizeof(float) * (size_t)nw);
    for (int64_t s = 0; rc == 0 && s < g->n; s++) {
        load_sample(x, s, x_per, xs);
        load_sample(dy, s, y_per, dys);
        im2col(g, xs, col);
        for (int64_t gi = 0; gi < g->groups; gi++) /* dw[og, kg] += dy[og, HW] col[kg, HW]^T */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)og, (blasint)kg,
                        (blasint)hw, 1.0f, dys + gi * og * hw, (blasint)hw, col + gi * kg * hw,
                        (blasint)hw, 1.0f, acc + gi * og * kg, (blasint)kg);
    }
    if (rc == 0)
        cpu_store(acc, dw->data, dw->dtype, 0, nw, st);
    cpu_scratch_free(be, acc, nw);
    cpu_scratch_free(be, dys, y_per);
    cpu_scratch_free(be, col, k * hw);
    cpu_scratch_free(be, xs, x_per);
    return rc;
}
