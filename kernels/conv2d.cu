/*
 * conv2d.cu: 2-d convolution forward, backward-data and backward-filter through cuDNN's
 * classic API (twin of harness/cpu/conv2d.c). Layout NCHW, weight [C_out, C_in, KH, KW],
 * groups = 1, square kernel, one stride / padding / dilation for both axes.
 *
 * cuDNN has no half-input, float-output convolution, so half operands are widened to
 * float32 scratch (exact) and every convolution runs on float32 data with float32 compute
 * and CUDNN_FMA_MATH (no TF32, no tensor-core conversion). The result lands in float32:
 * the output itself when it is float32, else scratch; the rounding store then adds the bias
 * (per output channel) and rounds, once, into the output's dtype with its counts.
 * Algorithms: cudnnGet*Algorithm_v7's heuristics order, deterministic ones first (so that
 * reruns count the same), the first whose workspace fits in memory; workspaces are
 * scratch, counted as workspace.
 */
#include "cuda.cuh"

typedef enum conv_pass { CONV_FORWARD, CONV_BACKWARD_DATA, CONV_BACKWARD_FILTER } conv_pass;

typedef struct conv_descs {
    cudnnTensorDescriptor_t x, y; /* input and output activations (or their gradients) */
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
} conv_descs;

static void descs_make(const conv2d_geom *g, conv_descs *d)
{
    const cudnnDataType_t f32 = cudnn_data_type(DTYPE_FLOAT32);
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&d->x));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NCHW, f32, (int)g->n,
                                           (int)g->c_in, (int)g->h_in, (int)g->w_in));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&d->y));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(d->y, CUDNN_TENSOR_NCHW, f32, (int)g->n,
                                           (int)g->c_out, (int)g->h_out, (int)g->w_out));
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&d->w));
    CUDNN_CHECK(cudnnSetFilter4dDescriptor(d->w, f32, CUDNN_TENSOR_NCHW,
                                           (int)g->c_out, (int)g->c_in, (int)g->kh, (int)g->kw));
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d->conv));
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
        d->conv, (int)g->padding, (int)g->padding, (int)g->stride, (int)g->stride,
        (int)g->dilation, (int)g->dilation, CUDNN_CROSS_CORRELATION, f32));
    CUDNN_CHECK(cudnnSetConvolutionMathType(d->conv, CUDNN_FMA_MATH));
}

static void descs_free(conv_descs *d)
{
    CUDNN_CHECK(cudnnDestroyConvolutionDescriptor(d->conv));
    CUDNN_CHECK(cudnnDestroyFilterDescriptor(d->w));
    CUDNN_CHECK(cudnnDestroyTensorDescriptor(d->y));
    CUDNN_CHECK(cudnnDestroyTensorDescriptor(d->x));
}

/* The first usable candidate (deterministic ones first) whose workspace could be allocated:
 * its algorithm, with *ws / *ws_bytes set; -1 with be->err set when there is none. The
 * descriptor stays in CUDNN_FMA_MATH, so candidates that need tensor-op math are skipped. */
template <class Perf>
static int pick_algo(backend *be, const Perf *perf, int count, void **ws, size_t *ws_bytes)
{
    bool tried = false;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < count; i++) {
            const Perf &p = perf[i];
            if (p.status != CUDNN_STATUS_SUCCESS || p.mathType == CUDNN_TENSOR_OP_MATH ||
                p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ||
                (p.determinism == CUDNN_DETERMINISTIC) != (pass == 0))
                continue;
            tried = true;
            *ws_bytes = p.memory;
            *ws = NULL;
            if (p.memory == 0 || (*ws = cuda_scratch_alloc(be, (int64_t)p.memory)))
                return (int)p.algo;
        }
    if (!tried)
        snprintf(be->err, sizeof be->err,
                 "cuDNN offers no float32 (FMA) algorithm for this convolution");
    return -1;
}

/* out = pass(a, b) in float32: forward (x, w) -> y, backward data (dy, w) -> dx, backward
 * filter (dy, x) -> dw; returns -1 (be->err) when no algorithm's workspace fits */
static int run_pass(backend *be, const conv_descs *d, conv_pass pass, const float *a,
                    const float *b, float *out)
{
    cudnnHandle_t h = cuda_ctx_of(be)->cudnn;
    const float one = 1.0f, zero = 0.0f;
    void *ws = NULL;
    size_t ws_bytes = 0;
    int count = 0, algo = -1;
    switch (pass) {
    case CONV_FORWARD: {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
            h, d->x, d->w, d->conv, d->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf));
        algo = pick_algo(be, perf, count, &ws, &ws_bytes);
        if (algo >= 0)
            CUDNN_CHECK(cudnnConvolutionForward(h, &one, d->x, a, d->w, b, d->conv,
                                                (cudnnConvolutionFwdAlgo_t)algo, ws, ws_bytes,
                                                &zero, d->y, out));
        break;
    }
    case CONV_BACKWARD_DATA: {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
            h, d->w, d->y, d->conv, d->x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, perf));
        algo = pick_algo(be, perf, count, &ws, &ws_bytes);
        if (algo >= 0)
            CUDNN_CHECK(cudnnConvolutionBackwardData(h, &one, d->w, b, d->y, a, d->conv,
                                                     (cudnnConvolutionBwdDataAlgo_t)algo, ws,
                                                     ws_bytes, &zero, d->x, out));
        break;
    }
    case CONV_BACKWARD_FILTER: {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
            h, d->x, d->y, d->conv, d->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, perf));
        algo = pick_algo(be, perf, count, &ws, &ws_bytes);
        if (algo >= 0)
            CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, &one, d->x, b, d->y, a, d->conv,
                                                       (cudnnConvolutionBwdFilterAlgo_t)algo, ws,
                                                       ws_bytes, &zero, d->w, out));
        break;
    }
    }
    cuda_scratch_free(be, ws, (int64_t)ws_bytes);
    return algo >= 0 ? 0 : -1;
}

/* acc[i] (+ bias of i's channel), the value the store rounds */
struct bias_op {
    const float *acc;
    const void *bias; /* NULL: none */
    dtype bias_dt;
    int64_t hw, channels;
    __device__ float operator()(int64_t i) const
    {
        float v = acc[i];
        return bias ? v + load_as_float(bias, bias_dt, (i / hw) % channels) : v;
    }
};

/* out = pass(a, b) (+ bias) in float32, rounded once into out's dtype */
static int conv_round(backend *be, const conv2d_geom *g, conv_pass pass, const tensor *a,
                      const tensor *b, const tensor *bias, tensor *out, round_stats *st)
{
    float *a_own = NULL, *b_own = NULL, *out_own = NULL;
    const float *af = cuda_as_f32(be, a, &a_own);
    const float *bf = af ? cuda_as_f32(be, b, &b_own) : NULL;
    int64_t out_bytes = out->numel * (int64_t)sizeof(float);
    float *of = NULL;
    if (bf)
        of = out->dtype == DTYPE_FLOAT32 ? (float *)out->data
                                         : (out_own = (float *)cuda_scratch_alloc(be, out_bytes));
    int rc = -1;
    if (of) {
        conv_descs d;
        descs_make(g, &d);
        rc = run_pass(be, &d, pass, af, bf, of);
        descs_free(&d);
    }
    if (rc == 0 && (bias || out_own || st)) /* a float32 output without bias is only counted */
        launch_store(be,
                     bias_op{of, bias ? bias->data : NULL, bias ? bias->dtype : DTYPE_FLOAT32,
                             g->h_out * g->w_out, g->c_out},
                     out, st);
    cuda_scratch_free(be, out_own, out_bytes);
    cuda_scratch_free(be, b_own, b->numel * (int64_t)sizeof(float));
    cuda_scratch_free(be, a_own, a->numel * (int64_t)sizeof(float));
    return rc;
}

int cuda_conv2d_forward(backend *be, const conv2d_geom *g, const tensor *x, const tensor *w,
                        const tensor *b, tensor *y, round_stats *st)
{
    return conv_round(be, g, CONV_FORWARD, x, w, b, y, st);
}

int cuda_conv2d_backward_input(backend *be, const conv2d_geom *g, const tensor *dy,
                               const tensor *w, tensor *dx, round_stats *st)
{
    return conv_round(be, g, CONV_BACKWARD_DATA, dy, w, NULL, dx, st);
}

int cuda_conv2d_backward_weight(backend *be, const conv2d_geom *g, const tensor *dy,
                                const tensor *x, tensor *dw, round_stats *st)
{
    return conv_round(be, g, CONV_BACKWARD_FILTER, dy, x, NULL, dw, st);
}
