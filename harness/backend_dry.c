/*
 * backend_dry.c: the counting backend behind the memory preflight. It allocates nothing
 * (every buffer is one shared dummy address, never read or written) and its ops do nothing,
 * so a dry pass of the real training code through it counts, in the run's memory account,
 * every byte the case will hold, by the same allocations as the real run.
 */
#include <stdlib.h>
#include <string.h>

#include "backend.h"

static char dry_dummy[64];

static void *dry_alloc(backend *be, int64_t bytes) { return (void)be, (void)bytes, dry_dummy; }
static void dry_free(backend *be, void *p) { (void)be, (void)p; }
static void dry_upload(backend *be, void *dst, const void *src, int64_t bytes)
{
    (void)be, (void)dst, (void)src, (void)bytes;
}
static void dry_download(backend *be, void *dst, const void *src, int64_t bytes)
{
    (void)be, (void)src;
    memset(dst, 0, (size_t)bytes);
}
static int64_t dry_mem_available(backend *be) { return (void)be, INT64_MAX; }
static void dry_synchronize(backend *be) { (void)be; }
static void dry_close(backend *be) { free(be); }
static void dry_unary(backend *be, const tensor *a, tensor *b, round_stats *st)
{
    (void)be, (void)a, (void)b, (void)st;
}
static void dry_mul_scalar(backend *be, const tensor *a, float s, tensor *b, round_stats *st)
{
    (void)be, (void)a, (void)s, (void)b, (void)st;
}
static void dry_fill(backend *be, tensor *t, float v) { (void)be, (void)t, (void)v; }
static void dry_observe(backend *be, const tensor *t, round_stats *st)
{
    (void)be, (void)t, (void)st;
}
static void dry_binary(backend *be, const tensor *a, const tensor *b, tensor *c, round_stats *st)
{
    (void)be, (void)a, (void)b, (void)c, (void)st;
}
static int dry_linear(backend *be, const tensor *x, const tensor *w, const tensor *b, tensor *y,
                      round_stats *st)
{
    return (void)be, (void)x, (void)w, (void)b, (void)y, (void)st, 0;
}
static int dry_binary_rc(backend *be, const tensor *a, const tensor *b, tensor *c, round_stats *st)
{
    return (void)be, (void)a, (void)b, (void)c, (void)st, 0;
}
static int dry_channel_sum(backend *be, const tensor *dy, int64_t outer, int64_t inner, tensor *db,
                           round_stats *st)
{
    return (void)be, (void)dy, (void)outer, (void)inner, (void)db, (void)st, 0;
}
static int dry_conv(backend *be, const conv2d_geom *g, const tensor *x, const tensor *w,
                    const tensor *b, tensor *y, round_stats *st)
{
    return (void)be, (void)g, (void)x, (void)w, (void)b, (void)y, (void)st, 0;
}
static int dry_conv_backward(backend *be, const conv2d_geom *g, const tensor *a, const tensor *b,
                             tensor *c, round_stats *st)
{
    return (void)be, (void)g, (void)a, (void)b, (void)c, (void)st, 0;
}
static void dry_mse_backward(backend *be, const tensor *dy, const tensor *a, const tensor *b,
                             double alpha, tensor *da, round_stats *st)
{
    (void)be, (void)dy, (void)a, (void)b, (void)alpha, (void)da, (void)st;
}
static void dry_unscale(backend *be, tensor *g, float inv, int *found_inf, round_stats *st)
{
    (void)be, (void)g, (void)inv, (void)found_inf, (void)st;
}
static void dry_optimizer_step(backend *be, const optim_config *cfg, const optim_hyper *h,
                               optim_tensors *t, optim_result *out)
{
    (void)be, (void)cfg, (void)h, (void)t, (void)out;
}

backend *backend_dry_open(mem_account *account)
{
    backend *be = calloc(1, sizeof *be);
    if (!be)
        return NULL;
    *be = (backend){
        .name = "dry",
        .device = "dry",
        .dry = true,
        .account = account,
        .alloc = dry_alloc,
        .free = dry_free,
        .upload = dry_upload,
        .download = dry_download,
        .mem_available = dry_mem_available,
        .synchronize = dry_synchronize,
        .close = dry_close,
        .cast = dry_unary,
        .mul_scalar = dry_mul_scalar,
        .fill = dry_fill,
        .observe = dry_observe,
        .relu_forward = dry_unary,
        .relu_backward = dry_binary,
        .linear_forward = dry_linear,
        .linear_backward_input = dry_binary_rc,
        .linear_backward_weight = dry_binary_rc,
        .channel_sum = dry_channel_sum,
        .conv2d_forward = dry_conv,
        .conv2d_backward_input = dry_conv_backward,
        .conv2d_backward_weight = dry_conv_backward,
        .log_softmax_forward = dry_unary,
        .log_softmax_backward = dry_binary,
        .nll_loss_forward = dry_binary,
        .nll_loss_backward = dry_binary,
        .mse_forward = dry_binary,
        .mse_backward = dry_mse_backward,
        .mean_forward = dry_unary,
        .mean_backward = dry_unary,
        .unscale = dry_unscale,
        .optimizer_step = dry_optimizer_step,
    };
    return be;
}
