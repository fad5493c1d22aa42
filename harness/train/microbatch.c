/* microbatch.c: accumulation's extra micro-batches (see microbatch.h). */
#include "microbatch.h"

#include <stdlib.h>

#include "layers/layer.h"
#include "model.h"
#include "core/rng.h"

/* the streams of micro-batch k: apart from model.c's (parameters 1.., data 1 << 20 ..) */
enum { STREAM_MICRO = 2 << 20, STREAM_MICRO_INPUT = 0, STREAM_MICRO_TARGET, STREAM_MICRO_LABELS };

static uint64_t micro_stream(int64_t k, int which)
{
    return STREAM_MICRO + 4u * (uint64_t)k + (uint64_t)which;
}

typedef struct micro_job {
    run *r;
    const char *path; /* the [data] file the values come from, or NULL: drawn */
    const tensor *t;
    int64_t k;
    int which;       /* STREAM_MICRO_INPUT, _TARGET or _LABELS */
    int64_t classes; /* int64 values drawn (labels, token ids): how many ids there are */
} micro_job;

static void *micro_values(void *ctx)
{
    const micro_job *j = ctx;
    const tensor *t = j->t;
    uint64_t seed = j->r->cfg->seed;
    if (j->path && t->dtype == DTYPE_INT64)
        return model_file_rows(j->r, j->path, j->k, t, true);
    float *v = j->path ? model_file_rows(j->r, j->path, j->k, t, false)
                       : malloc(sizeof(float) * (size_t)(t->numel ? t->numel : 1));
    void *buf = malloc((size_t)(tensor_bytes(t) ? tensor_bytes(t) : 1));
    if (!v || !buf) {
        free(v), free(buf);
        run_fail(j->r, "out of host memory for micro-batch %lld's %s", (long long)j->k, t->name);
    }
    if (j->path) {
        for (int64_t i = 0; i < t->numel; i++)
            store_from_float(buf, t->dtype, i, v[i]);
    } else if (t->dtype == DTYPE_INT64) { /* labels or token ids, as model.c's draw_ids:
                                           * floor(u * classes) */
        rng_fill_uniform(seed, micro_stream(j->k, j->which), v, t->numel, 0.0, 1.0);
        for (int64_t i = 0; i < t->numel; i++) {
            int64_t c = (int64_t)((double)v[i] * (double)j->classes);
            ((int64_t *)buf)[i] = c < j->classes ? c : j->classes - 1;
        }
    } else {
        rng_fill_normal(seed, micro_stream(j->k, j->which), v, t->numel);
        for (int64_t i = 0; i < t->numel; i++)
            store_from_float(buf, t->dtype, i, v[i]);
    }
    free(v);
    return buf;
}

tensor *microbatch_input(run *r, int64_t k, const tensor *like)
{
    tensor *x = run_tensor(r, "input", like->dtype, like->ndim, like->shape, MEM_INPUTS);
    tensor_why(x, DTYPE_REASON_DATA, NULL, NULL, 0);
    const case_config *cfg = r->cfg;
    micro_job j = {.r = r,
                   .path = cfg->input == INPUT_FILE ? cfg->input_path : NULL,
                   .t = x,
                   .k = k,
                   .which = STREAM_MICRO_INPUT,
                   .classes = cfg->input_tokens ? cfg->vocab : 0};
    r->be->upload_values(r->be, x->data, tensor_bytes(x), micro_values, &j);
    return x;
}

/* the target's dtype and shape as model_target() makes them */
tensor *microbatch_target(run *r, int64_t k, const tensor *out)
{
    const case_config *cfg = r->cfg;
    bool labels = loss_def_of(cfg->loss)->class_target;
    dtype dt = labels                             ? DTYPE_INT64
               : cfg->target == TARGET_RANDN_LIKE ? out->dtype
                                                  : DTYPE_FLOAT32;
    bool file = cfg->target == TARGET_FILE;
    /* labels are shaped as model_target's: out's shape less the classes ([B], or [B, T] over
     * a sequence's positions) */
    int ndim = labels ? out->ndim - 1 : out->ndim;
    tensor *y = run_tensor(r, "target", dt, ndim, out->shape, MEM_INPUTS);
    tensor_why(y, DTYPE_REASON_DATA, NULL, NULL, 0);
    micro_job j = {.r = r,
                   .path = file ? cfg->target_path : NULL,
                   .t = y,
                   .k = k,
                   .which = labels ? STREAM_MICRO_LABELS : STREAM_MICRO_TARGET,
                   .classes = labels ? out->shape[out->ndim - 1] : 0};
    r->be->upload_values(r->be, y->data, tensor_bytes(y), micro_values, &j);
    return y;
}
