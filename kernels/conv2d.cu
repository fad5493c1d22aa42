/*
 * conv2d.cu: 2-d convolution forward, backward-data and backward-filter through cuDNN's
 * classic API (twin of harness/ops/cpu/conv2d.c). Layout NCHW, weight [C_out, C_in / groups,
 * KH, KW], cuDNN's group count for groups > 1 (cudnnSetConvolutionGroupCount, as PyTorch's
 * cuDNN convolution sets it), square kernel, one stride / padding / dilation for both axes.
 *
 * cuDNN has no half-input, float-output convolution, so half operands are widened to
 * float32 scratch (exact) and every convolution runs on float32 data with float32 compute
 * and CUDNN_FMA_MATH (no TF32, no tensor-core conversion). The result lands in float32:
 * the output itself when it is float32, else scratch; the rounding store then adds the bias
 * (per output channel) and rounds, once, into the output's dtype with its counts.
 * Algorithms: only the exact, deterministic ones (conv_algo.h: forward IMPLICIT_GEMM,
 * IMPLICIT_PRECOMP_GEMM, GEMM; backward-data and backward-filter ALGO_1), in the order of
 * cudnnGet*Algorithm_v7's heuristics, the first cuDNN supports here whose workspace fits in
 * memory; the workspace is sized by cudnnGet*WorkspaceSize for that algorithm on the
 * descriptors the convolution runs with. None fits: the op fails with the workspace the
 * smallest would need. Workspaces are scratch, counted as workspace.
 */
#include "conv_algo.h"
#include "cuda.cuh"

/* the largest *_ALGO_COUNT of the three passes */
#define CONV_ALGO_MAX ((int)CUDNN_CONVOLUTION_FWD_ALGO_COUNT)
static_assert((int)CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT <= CONV_ALGO_MAX &&
                  (int)CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT <= CONV_ALGO_MAX,
              "CONV_ALGO_MAX holds every pass's algorithms");

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
    CUDNN_CHECK(cudnnSetFilter4dDescriptor(d->w, f32, CUDNN_TENSOR_NCHW, (int)g->c_out,
                                           (int)(g->c_in / g->groups), (int)g->kh, (int)g->kw));
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d->conv));
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
        d->conv, (int)g->padding, (int)g->padding, (int)g->stride, (int)g->stride,
        (int)g->dilation, (int)g->dilation, CUDNN_CROSS_CORRELATION, f32));
    CUDNN_CHECK(cudnnSetConvolutionMathType(d->conv, CUDNN_FMA_MATH));
    CUDNN_CHECK(cudnnSetConvolutionGroupCount(d->conv, (int)g->groups));
}

static void descs_free(conv_descs *d)
{
    CUDNN_CHECK(cudnnDestroyConvolutionDescriptor(d->conv));
    CUDNN_CHECK(cudnnDestroyFilterDescriptor(d->w));
    CUDNN_CHECK(cudnnDestroyTensorDescriptor(d->y));
    CUDNN_CHECK(cudnnDestroyTensorDescriptor(d->x));
}

/* The workspace algorithm `algo` of the pass needs on these descriptors (the ones the
 * convolution then runs with, CUDNN_FMA_MATH included); cuDNN's status: anything but
 * success means the algorithm cannot run this convolution (the next one is tried). */
static cudnnStatus_t workspace_size(cudnnHandle_t h, const conv_descs *d, conv_pass pass, int algo,
                                    size_t *bytes)
{
    switch (pass) {
    case CONV_FORWARD:
        return cudnnGetConvolutionForwardWorkspaceSize(h, d->x, d->w, d->conv, d->y,
                                                       (cudnnConvolutionFwdAlgo_t)algo, bytes);
    case CONV_BACKWARD_DATA:
        return cudnnGetConvolutionBackwardDataWorkspaceSize(
            h, d->w, d->y, d->conv, d->x, (cudnnConvolutionBwdDataAlgo_t)algo, bytes);
    case CONV_BACKWARD_FILTER:
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(
            h, d->x, d->y, d->conv, d->w, (cudnnConvolutionBwdFilterAlgo_t)algo, bytes);
    }
    return CUDNN_STATUS_BAD_PARAM;
}

/* The allowed algorithms (conv_algo.h) in the order to try them: the heuristic's order
 * first (perf[0..count), fastest first), then any allowed one it did not offer. Returns
 * how many were written to order[]. */
template <class Perf>
static int exact_candidates(conv_pass pass, const Perf *perf, int count, int *order)
{
    int n = 0;
    bool seen[CONV_ALGO_MAX] = {};
    for (int i = 0; i < count; i++) {
        int a = (int)perf[i].algo;
        if (perf[i].status == CUDNN_STATUS_SUCCESS && conv_algo_exact(pass, a) && !seen[a]) {
            seen[a] = true;
            order[n++] = a;
        }
    }
    for (int a = 0; a < conv_algo_count(pass); a++)
        if (conv_algo_exact(pass, a) && !seen[a]) {
            seen[a] = true;
            order[n++] = a;
        }
    return n;
}

/* The first candidate cuDNN supports here whose workspace (sized for these descriptors)
 * could be allocated: its algorithm, with *ws / *ws_bytes set; -1 with be->err set when
 * there is none (the workspace the smallest supported one would need, when memory is
 * what is missing). */
static int pick_algo(backend *be, const conv_descs *d, conv_pass pass, const int *order, int n,
                     void **ws, size_t *ws_bytes)
{
    cudnnHandle_t h = cuda_ctx_of(be)->cudnn;
    bool supported = false;
    size_t least = 0;
    cudnnStatus_t refused = CUDNN_STATUS_SUCCESS; /* the first algorithm's refusal */
    for (int i = 0; i < n; i++) {
        size_t bytes = 0;
        cudnnStatus_t s = workspace_size(h, d, pass, order[i], &bytes);
        if (s != CUDNN_STATUS_SUCCESS) {
            if (refused == CUDNN_STATUS_SUCCESS)
                refused = s;
            continue;
        }
        if (!supported || bytes < least)
            least = bytes;
        supported = true;
        *ws_bytes = bytes;
        *ws = NULL;
        if (bytes == 0 || (*ws = cuda_scratch_alloc(be, (int64_t)bytes)))
            return order[i];
    }
    if (supported)
        snprintf(be->err, sizeof be->err,
                 "%s: no exact, deterministic cuDNN algorithm fits in GPU memory: the smallest "
                 "needs a workspace of %zu bytes (%lld free)",
                 conv_pass_name(pass), least, (long long)cuda_free_bytes());
    else
        snprintf(be->err, sizeof be->err,
                 "%s: cuDNN runs none of the exact, deterministic algorithms (forward "
                 "IMPLICIT_GEMM, IMPLICIT_PRECOMP_GEMM, GEMM; backward ALGO_1) on this "
                 "convolution in float32 with FMA math (%s)",
                 conv_pass_name(pass), cudnnGetErrorString(refused));
    *ws = NULL;
    *ws_bytes = 0;
    return -1;
}

/* out = pass(a, b) in float32: forward (x, w) -> y, backward data (dy, w) -> dx, backward
 * filter (dy, x) -> dw; returns -1 (be->err) when no allowed algorithm can run */
static int run_pass(backend *be, const conv_descs *d, conv_pass pass, const float *a,
                    const float *b, float *out)
{
    cudnnHandle_t h = cuda_ctx_of(be)->cudnn;
    const float one = 1.0f, zero = 0.0f;
    void *ws = NULL;
    size_t ws_bytes = 0;
    int count = 0, n = 0, algo = -1;
    int order[CONV_ALGO_MAX];
    switch (pass) {
    case CONV_FORWARD: {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
            h, d->x, d->w, d->conv, d->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf));
        n = exact_candidates(pass, perf, count, order);
        algo = pick_algo(be, d, pass, order, n, &ws, &ws_bytes);
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
        n = exact_candidates(pass, perf, count, order);
        algo = pick_algo(be, d, pass, order, n, &ws, &ws_bytes);
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
        n = exact_candidates(pass, perf, count, order);
        algo = pick_algo(be, d, pass, order, n, &ws, &ws_bytes);
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
