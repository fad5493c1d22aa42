/*
 * conv_algo.h: which of cuDNN's convolution algorithms conv2d.cu may run, as pure functions
 * over cuDNN's enum values (C and C++, so the tests check them on a machine without a GPU).
 *
 * Allowed: the algorithms that form every float32 product exactly and add in an order fixed
 * by the geometry (deterministic, no atomics): forward IMPLICIT_GEMM, IMPLICIT_PRECOMP_GEMM
 * and GEMM, backward-data ALGO_1, backward-filter ALGO_1. Refused: FFT, FFT_TILING and
 * WINOGRAD(_NONFUSED), which transform the operands (values that should be 0 or tiny come
 * back as rounding noise, and the zero / underflow / subnormal counts drift), DIRECT (not
 * implemented), and backward ALGO_0 / filter ALGO_3, which add with atomics (counts that
 * vary from run to run). A switch without default over each enum: a value a new cuDNN adds
 * is named by -Wswitch.
 */
#ifndef AMPSCOPE_CONV_ALGO_H
#define AMPSCOPE_CONV_ALGO_H

#include <stdbool.h>

#include <cudnn.h>

typedef enum conv_pass { CONV_FORWARD, CONV_BACKWARD_DATA, CONV_BACKWARD_FILTER } conv_pass;

/* the number of algorithm values of a pass (cuDNN's *_ALGO_COUNT) */
static inline int conv_algo_count(conv_pass pass)
{
    switch (pass) {
    case CONV_FORWARD:
        return CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
    case CONV_BACKWARD_DATA:
        return CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
    case CONV_BACKWARD_FILTER:
        return CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
    }
    return 0;
}

static inline bool conv_fwd_algo_exact(cudnnConvolutionFwdAlgo_t a)
{
    switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM:
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM:
        return true;
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT:
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT:
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING:
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD:
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED:
    case CUDNN_CONVOLUTION_FWD_ALGO_COUNT:
        return false;
    }
    return false;
}

static inline bool conv_bwd_data_algo_exact(cudnnConvolutionBwdDataAlgo_t a)
{
    switch (a) {
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1:
        return true;
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0:
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT:
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING:
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD:
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED:
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT:
        return false;
    }
    return false;
}

static inline bool conv_bwd_filter_algo_exact(cudnnConvolutionBwdFilterAlgo_t a)
{
    switch (a) {
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1:
        return true;
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0:
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT:
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3:
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD:
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED:
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING:
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT:
        return false;
    }
    return false;
}

/* May conv2d.cu run algorithm `algo` (a value of the pass's enum) of this pass? */
static inline bool conv_algo_exact(conv_pass pass, int algo)
{
    if (algo < 0 || algo >= conv_algo_count(pass))
        return false;
    switch (pass) {
    case CONV_FORWARD:
        return conv_fwd_algo_exact((cudnnConvolutionFwdAlgo_t)algo);
    case CONV_BACKWARD_DATA:
        return conv_bwd_data_algo_exact((cudnnConvolutionBwdDataAlgo_t)algo);
    case CONV_BACKWARD_FILTER:
        return conv_bwd_filter_algo_exact((cudnnConvolutionBwdFilterAlgo_t)algo);
    }
    return false;
}

/* the pass's name, as errors print it */
static inline const char *conv_pass_name(conv_pass pass)
{
    switch (pass) {
    case CONV_FORWARD:
        return "conv2d forward";
    case CONV_BACKWARD_DATA:
        return "conv2d backward (data)";
    case CONV_BACKWARD_FILTER:
        return "conv2d backward (filter)";
    }
    return "conv2d";
}

#endif
