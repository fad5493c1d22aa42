/* model.c: parameters, data and the forward pass of the case's sequential model (see
 * model.h). */
#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layers.h"
#include "npy.h"

tensor *run_upload_f32(run *r, const char *name, dtype dt, int ndim, const int64_t *shape,
                       mem_category cat, const float *host)
{
    tensor *t = run_tensor(r, name, dt, ndim, shape, cat);
    size_t bytes = (size_t)tensor_bytes(t);
    void *buf = malloc(bytes ? bytes : 1);
    if (!buf)
        run_fail(r, "out of host memory for %s (%zu bytes)", name, bytes);
    for (int64_t i = 0; i < t->numel; i++)
        store_from_float(buf, dt, i, host[i]);
    r->be->upload(r->be, t->data, buf, (int64_t)bytes);
    free(buf);
    return t;
}

/* float32 values of an .npy file that must have `numel` elements and the given shape */
static float *read_npy_f32(run *r, const char *path, int line, int ndim, const int64_t *shape)
{
    npy_array a;
    round_counts f8;
    char err[512];
    if (npy_read(path, &a, &f8, err, sizeof err))
        run_fail(r, "%s:%d: %s", r->cfg->path, line, err);
    bool same = a.ndim == ndim;
    for (int i = 0; same && i < ndim; i++)
        same = a.shape[i] == shape[i];
    if (!same || a.dt == DTYPE_INT64) {
        npy_free(&a);
        run_fail(r, "%s:%d: %s: expected a float array of shape %lld... with %d dims", r->cfg->path,
                 line, path, (long long)shape[0], ndim);
    }
    float *v = malloc(sizeof(float) * (size_t)a.numel);
    if (!v)
        run_fail(r, "out of host memory reading %s", path);
    for (int64_t i = 0; i < a.numel; i++)
        v[i] = load_as_float(a.data, a.dt, i);
    npy_free(&a);
    return v;
}

static const init_spec *find_init(const case_config *cfg, const char *name)
{
    for (int i = 0; i < cfg->n_inits; i++)
        if (strcmp(cfg->inits[i].tensor, name) == 0)
            return &cfg->inits[i];
    return NULL;
}

static tensor *make_param(run *r, rng *g, const char *layer, const char *what, int ndim,
                          const int64_t *shape, double bound)
{
    char name[TENSOR_NAME_MAX];
    snprintf(name, sizeof name, "%s.%s", layer, what);
    int64_t n = shape_numel(ndim, shape);
    const init_spec *init = find_init(r->cfg, name);
    float *v;
    if (r->be->dry) { /* counting only: the tensor, not its values */
        tensor *p = run_tensor(r, name, r->cfg->params, ndim, shape, MEM_PARAMS);
        p->is_leaf = p->requires_grad = true;
        return p;
    }
    if (init) {
        v = read_npy_f32(r, init->path, init->line, ndim, shape);
    } else {
        v = malloc(sizeof(float) * (size_t)n);
        if (!v)
            run_fail(r, "out of host memory for %s", name);
        for (int64_t i = 0; i < n; i++)
            v[i] = (float)((2.0 * rng_uniform(g) - 1.0) * bound);
    }
    tensor *p = run_upload_f32(r, name, r->cfg->params, ndim, shape, MEM_PARAMS, v);
    free(v);
    p->is_leaf = true;
    p->requires_grad = true;
    return p;
}

void model_init(run *r, model *m, rng *g)
{
    const case_config *cfg = r->cfg;
    memset(m, 0, sizeof *m);
    for (int i = 0; i < cfg->n_layers; i++) {
        const layer_spec *l = &cfg->layers[i];
        int64_t fan_in;
        int64_t wshape[4];
        int wdim;
        if (l->kind == LAYER_LINEAR) {
            wshape[0] = l->out, wshape[1] = l->in, wdim = 2;
            fan_in = l->in;
        } else if (l->kind == LAYER_CONV2D) {
            wshape[0] = l->out, wshape[1] = l->in, wshape[2] = wshape[3] = l->kernel, wdim = 4;
            fan_in = l->in * l->kernel * l->kernel;
        } else {
            continue;
        }
        double bound = 1.0 / sqrt((double)fan_in); /* kaiming_uniform_(a=sqrt(5)) and bias */
        m->weight[i] = make_param(r, g, l->name, "weight", wdim, wshape, bound);
        m->params[m->n_params++] = m->weight[i];
        if (l->bias) {
            m->bias[i] = make_param(r, g, l->name, "bias", 1, &l->out, bound);
            m->params[m->n_params++] = m->bias[i];
        }
    }
    int64_t shape[4] = {cfg->batch};
    for (int i = 0; i < cfg->sample_ndim; i++)
        shape[i + 1] = cfg->sample_shape[i];
    int ndim = cfg->sample_ndim + 1;
    int64_t n = shape_numel(ndim, shape);
    float *v;
    if (r->be->dry) {
        m->input = run_tensor(r, "input", cfg->input_dtype, ndim, shape, MEM_INPUTS);
        return;
    }
    if (cfg->input == INPUT_FILE) {
        v = read_npy_f32(r, cfg->input_path, 0, ndim, shape);
    } else {
        v = malloc(sizeof(float) * (size_t)n);
        if (!v)
            run_fail(r, "out of host memory for the input (%lld values)", (long long)n);
        for (int64_t i = 0; i < n; i++)
            v[i] = (float)rng_normal(g);
    }
    m->input = run_upload_f32(r, "input", cfg->input_dtype, ndim, shape, MEM_INPUTS, v);
    free(v);
}

tensor *model_target(run *r, model *m, rng *g, const tensor *out)
{
    const case_config *cfg = r->cfg;
    if (m->target)
        return m->target;
    if (r->be->dry) {
        bool labels = cfg->target == TARGET_CLASSES;
        dtype dt = labels                             ? DTYPE_INT64
                   : cfg->target == TARGET_RANDN_LIKE ? out->dtype
                                                      : DTYPE_FLOAT32;
        m->target = run_tensor(r, "target", dt, labels ? 1 : out->ndim,
                               labels ? &cfg->batch : out->shape, MEM_INPUTS);
        return m->target;
    }
    if (cfg->target == TARGET_CLASSES) {
        int64_t classes = out->shape[out->ndim - 1];
        int64_t *labels = malloc(sizeof(int64_t) * (size_t)cfg->batch);
        if (!labels)
            run_fail(r, "out of host memory for the target");
        for (int64_t i = 0; i < cfg->batch; i++)
            labels[i] = rng_below(g, classes);
        m->target = run_tensor(r, "target", DTYPE_INT64, 1, &cfg->batch, MEM_INPUTS);
        r->be->upload(r->be, m->target->data, labels, (int64_t)sizeof(int64_t) * cfg->batch);
        free(labels);
        return m->target;
    }
    float *v;
    if (cfg->target == TARGET_FILE) {
        v = read_npy_f32(r, cfg->target_path, 0, out->ndim, out->shape);
    } else {
        v = malloc(sizeof(float) * (size_t)out->numel);
        if (!v)
            run_fail(r, "out of host memory for the target");
        for (int64_t i = 0; i < out->numel; i++)
            v[i] = (float)rng_normal(g);
    }
    dtype dt = cfg->target == TARGET_RANDN_LIKE ? out->dtype : DTYPE_FLOAT32;
    m->target = run_upload_f32(r, "target", dt, out->ndim, out->shape, MEM_INPUTS, v);
    free(v);
    return m->target;
}

tensor *model_forward(run *r, model *m)
{
    tensor *x = m->input;
    tensor_retain(x);
    for (int i = 0; i < r->cfg->n_layers; i++) {
        const layer_spec *l = &r->cfg->layers[i];
        tensor *y = NULL;
        switch (l->kind) {
        case LAYER_LINEAR:
            y = linear_forward(r, l, x, m->weight[i], m->bias[i]);
            break;
        case LAYER_CONV2D:
            y = conv2d_forward(r, l, x, m->weight[i], m->bias[i]);
            break;
        case LAYER_RELU:
            y = relu_forward(r, l, x);
            break;
        case LAYER_FLATTEN:
            y = flatten_forward(r, l, x);
            break;
        }
        tensor_release(&r->pool, x);
        x = y;
    }
    return x;
}
