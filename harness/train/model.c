/* model.c: parameters, data and the forward pass of the case's model, a graph of layers
 * (see model.h). */
#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/distributed.h"
#include "core/npy.h"

/* What a tensor's values are made from, when the backend asks for them (upload_values:
 * the counting backend never does): its producer below reads the fields it needs. */
typedef struct values_job {
    run *r;
    model *m;
    const tensor *t;
    const init_spec *init; /* a parameter's [init] file, or NULL */
    uint64_t stream;       /* else the seed's stream and the bound of its uniform */
    double bound;         /* PARAM_INIT_UNIFORM_FAN_IN: the uniform's bound */
    param_init init_kind; /* a parameter's init when there is no file */
    int64_t zero_row;     /* PARAM_INIT_NORMAL: the padding_idx row, zeroed; -1: none */
    double mean, std;     /* PARAM_INIT_NORMAL_STD, PARAM_INIT_TRUNC_NORMAL */
} values_job;

static void upload(const values_job *j, backend_values_fn make)
{
    j->r->be->upload_values(j->r->be, j->t->data, tensor_bytes(j->t), make, (void *)j);
}

/* float32 values v (freed) rounded into the job's tensor's dtype, in a new host buffer */
static void *in_dtype(const values_job *j, float *v)
{
    const tensor *t = j->t;
    size_t bytes = (size_t)tensor_bytes(t);
    void *buf = malloc(bytes ? bytes : 1);
    if (!buf) {
        free(v);
        run_fail(j->r, "out of host memory for %s (%zu bytes)", t->name, bytes);
    }
    for (int64_t i = 0; i < t->numel; i++)
        store_from_float(buf, t->dtype, i, v[i]);
    free(v);
    return buf;
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

/* the random streams of a case's seed (rng.c) */
enum { STREAM_INPUT = 1 << 20, STREAM_TARGET, STREAM_LABELS };

static float *host_floats(run *r, int64_t n, const char *what)
{
    float *v = malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (!v)
        run_fail(r, "out of host memory for %s (%lld values)", what, (long long)n);
    return v;
}

/* init.trunc_normal_(mean, std, a=-2, b=2) (torch/nn/init.py): N(mean, std^2) conditioned
 * on [a, b], the absolute bounds PyTorch gives by default. PyTorch draws it by inverting the
 * normal's CDF of a uniform; here each value outside [a, b] is drawn again from a stream of
 * its own round (the same distribution; neither draws PyTorch's numbers, as no init here
 * does). */
static void trunc_normal(const values_job *j, float *v, int64_t n)
{
    const double a = -2.0, b = 2.0;
    float *redraw = host_floats(j->r, n, j->t->name);
    for (int64_t i = 0; i < n; i++)
        v[i] = NAN;
    for (uint64_t round = 0;; round++) {
        bool left = false;
        rng_fill_normal(j->r->cfg->seed, j->stream ^ (round << 40), redraw, n);
        for (int64_t i = 0; i < n; i++) {
            double x = j->mean + j->std * (double)redraw[i];
            if (isnan(v[i]) && x >= a && x <= b)
                v[i] = (float)x;
            left = left || isnan(v[i]);
        }
        if (!left)
            break;
        if (round == 1000) {
            free(redraw);
            free(v);
            run_fail(j->r, "%s: trunc_normal_ with mean %g and std %g draws no value in [-2, 2]",
                     j->t->name, j->mean, j->std);
        }
    }
    free(redraw);
}

/* a parameter's values: its [init] file's, or its initialisation (layer.h's param_init) */
static void *param_values(void *ctx)
{
    const values_job *j = ctx;
    const tensor *t = j->t;
    float *v;
    if (j->init) {
        v = read_npy_f32(j->r, j->init->path, j->init->line, t->ndim, t->shape);
    } else {
        v = host_floats(j->r, t->numel, t->name);
        switch (j->init_kind) {
        case PARAM_INIT_UNIFORM_FAN_IN:
            rng_fill_uniform(j->r->cfg->seed, j->stream, v, t->numel, -j->bound, j->bound);
            break;
        case PARAM_INIT_NORMAL: {
            rng_fill_normal(j->r->cfg->seed, j->stream, v, t->numel);
            int64_t cols = t->numel / t->shape[0];
            for (int64_t c = 0; j->zero_row >= 0 && c < cols; c++)
                v[j->zero_row * cols + c] = 0.0f;
            break;
        }
        case PARAM_INIT_NORMAL_STD: /* init.normal_(mean, std) */
            rng_fill_normal(j->r->cfg->seed, j->stream, v, t->numel);
            for (int64_t i = 0; i < t->numel; i++)
                v[i] = (float)(j->mean + j->std * (double)v[i]);
            break;
        case PARAM_INIT_TRUNC_NORMAL:
            trunc_normal(j, v, t->numel);
            break;
        case PARAM_INIT_ONES:
        case PARAM_INIT_ZEROS:
        case PARAM_BUFFER_ONES:
        case PARAM_BUFFER_ZEROS:
            for (int64_t i = 0; i < t->numel; i++)
                v[i] = j->init_kind == PARAM_INIT_ONES || j->init_kind == PARAM_BUFFER_ONES;
            break;
        case PARAM_BUFFER_FILE: /* its file is an [init] entry (case/model.c) */
            free(v);
            run_fail(j->r, "%s: a constant without its file", t->name);
        }
    }
    return in_dtype(j, v);
}

/* a parameter, or a buffer (no gradient: not a leaf autograd tracks) */
static tensor *make_param(run *r, uint64_t stream, const layer_spec *l, int ndim,
                          const int64_t *shape, const layer_param *lp, double bound)
{
    char name[TENSOR_NAME_MAX];
    layer_param_name(l, lp, name, sizeof name);
    bool buffer = param_is_buffer(lp);
    /* a constant keeps its file's dtype unless module.half() or .bfloat16() casts it */
    dtype dt = lp->init == PARAM_BUFFER_FILE && r->cfg->params == DTYPE_FLOAT32 ? l->file_dtype
                                                                              : r->cfg->params;
    tensor *p = run_tensor(r, name, dt, ndim, shape, buffer ? MEM_BUFFERS : MEM_PARAMS);
    tensor_why(p, DTYPE_REASON_PARAM, NULL, NULL, 0);
    upload(&(values_job){.r = r, .t = p, .init = find_init(r->cfg, name), .stream = stream,
                         .bound = bound, .init_kind = lp->init,
                         .zero_row = lp->init == PARAM_INIT_NORMAL ? lp->fan_in : -1,
                         .mean = l->init_mean, .std = l->init_std},
           param_values);
    p->is_leaf = !buffer;
    p->requires_grad = !buffer;
    return p;
}

/* n int64 ids uniform in [0, classes) from a stream of the case's seed (a malloc'd array) */
static int64_t *draw_ids(run *r, uint64_t stream, int64_t n, int64_t classes, const char *what)
{
    int64_t *ids = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    float *u = host_floats(r, n, what);
    if (!ids) {
        free(u);
        run_fail(r, "out of host memory for %s", what);
    }
    rng_fill_uniform(r->cfg->seed, stream, u, n, 0.0, 1.0);
    for (int64_t i = 0; i < n; i++) {
        int64_t k = (int64_t)((double)u[i] * (double)classes);
        ids[i] = k < classes ? k : classes - 1;
    }
    free(u);
    return ids;
}

/* the target's values, drawn with the rest of the data (the upload waits for the output's
 * dtype, which randn_like follows) */
static void draw_target(run *r, model *m)
{
    const case_config *cfg = r->cfg;
    const layer_spec *last = &cfg->layers[cfg->n_layers - 1];
    if (cfg->target == TARGET_CLASSES) { /* [B] or [B, T]: classes over the last dim */
        int64_t classes = last->out_shape[last->out_ndim - 1];
        int64_t n = cfg->batch * shape_numel(last->out_ndim - 1, last->out_shape);
        m->labels = draw_ids(r, STREAM_LABELS, n, classes, "the labels");
    } else if (cfg->target == TARGET_RANDN || cfg->target == TARGET_RANDN_LIKE) {
        int64_t n = cfg->batch * shape_numel(last->out_ndim, last->out_shape);
        m->target_values = host_floats(r, n, "the target");
        rng_fill_normal(cfg->seed, STREAM_TARGET, m->target_values, n);
    }
}

/* the values of a parameter the case does not read from a file */
static double init_bound(const layer_param *p)
{
    switch (p->init) {
    case PARAM_INIT_UNIFORM_FAN_IN:
        return 1.0 / sqrt((double)p->fan_in); /* kaiming_uniform_(a=sqrt(5)) and bias */
    case PARAM_INIT_NORMAL: /* normal_ */
    case PARAM_INIT_NORMAL_STD:
    case PARAM_INIT_TRUNC_NORMAL:
    case PARAM_BUFFER_FILE:
    case PARAM_INIT_ONES:
    case PARAM_INIT_ZEROS:
    case PARAM_BUFFER_ONES:
    case PARAM_BUFFER_ZEROS:
        break;
    }
    return 0.0;
}

/* The rows of a [data] file that micro-batch k of this rank takes (checked when the case was
 * loaded: the file holds accumulate x world_size x batch samples; one of the two is 1).
 * Local sample i is file row (k * batch + i) * world_size + rank: micro-batch k takes
 * samples [k * batch, (k + 1) * batch), and rank r of W takes r, r + W, ... as PyTorch's
 * DistributedSampler(shuffle=False) does (torch/utils/data/distributed.py:
 * indices[self.rank:self.total_size:self.num_replicas]). Returns int64 ids (ids) or
 * float32 values, malloc'd, with t's numel. */
void *model_file_rows(run *r, const char *path, int64_t k, const tensor *t, bool ids)
{
    const case_config *cfg = r->cfg;
    int64_t world = cfg->world_size > 1 ? cfg->world_size : 1;
    int64_t rank = world > 1 ? distributed_rank() : 0;
    int64_t rows = t->shape[0], row = rows ? t->numel / rows : 0;
    int64_t file_rows = rows * (cfg->accumulate > 1 ? cfg->accumulate : 1) * world;
    npy_array a;
    char err[512];
    if (npy_read(path, &a, NULL, err, sizeof err))
        run_fail(r, "%s", err);
    if ((a.dt == DTYPE_INT64) != ids || a.ndim < 1 || a.shape[0] != file_rows ||
        a.numel != file_rows * row) {
        npy_free(&a);
        run_fail(r, "%s: expected %lld %s samples of %lld values", path, (long long)file_rows,
                 ids ? "int64" : "float", (long long)row);
    }
    void *out = malloc((ids ? sizeof(int64_t) : sizeof(float)) * (size_t)(t->numel ? t->numel : 1));
    if (!out) {
        npy_free(&a);
        run_fail(r, "out of host memory reading %s", path);
    }
    for (int64_t i = 0; i < rows; i++) {
        int64_t from = ((k * rows + i) * world + rank) * row;
        for (int64_t j = 0; j < row; j++) {
            if (ids)
                ((int64_t *)out)[i * row + j] = ((const int64_t *)a.data)[from + j];
            else
                ((float *)out)[i * row + j] = load_as_float(a.data, a.dt, from + j);
        }
    }
    npy_free(&a);
    return out;
}

/* the input's values (its file's, or the seed's normal), and with them the target's */
static void *input_values(void *ctx)
{
    const values_job *j = ctx;
    const case_config *cfg = j->r->cfg;
    const tensor *t = j->t;
    float *v;
    if (cfg->input_tokens) {
        void *ids = cfg->input == INPUT_FILE
                        ? model_file_rows(j->r, cfg->input_path, 0, t, true)
                        : draw_ids(j->r, STREAM_INPUT, t->numel, cfg->vocab, "the token ids");
        draw_target(j->r, j->m);
        return ids;
    }
    if (cfg->input == INPUT_FILE) {
        v = model_file_rows(j->r, cfg->input_path, 0, t, false);
    } else {
        v = host_floats(j->r, t->numel, "the input");
        rng_fill_normal(cfg->seed, STREAM_INPUT, v, t->numel);
    }
    draw_target(j->r, j->m);
    return in_dtype(j, v);
}

void model_init(run *r, model *m)
{
    const case_config *cfg = r->cfg;
    memset(m, 0, sizeof *m);
    for (int i = 0; i < cfg->n_layers; i++) {
        const layer_spec *l = &cfg->layers[i];
        layer_param ps[LAYER_MAX_PARAMS];
        int n = layer_def_of(l->kind)->params(l, ps);
        for (int k = 0; k < n; k++) {
            if (k == 0 && l->tied >= 0) { /* one tensor, one .grad, one optimizer state */
                m->layer_params[i][0] = m->layer_params[l->tied][0];
                continue;
            }
            tensor *p = make_param(r, (uint64_t)m->n_params + 1, l, ps[k].ndim,
                                   ps[k].shape, &ps[k], init_bound(&ps[k]));
            m->layer_params[i][k] = p;
            if (!param_is_buffer(&ps[k]))
                m->params[m->n_params++] = p;
        }
    }
    int64_t shape[TENSOR_MAX_DIMS] = {cfg->batch};
    for (int i = 0; i < cfg->sample_ndim; i++)
        shape[i + 1] = cfg->sample_shape[i];
    int ndim = cfg->sample_ndim + 1;
    m->input = run_tensor(r, "input", cfg->input_dtype, ndim, shape, MEM_INPUTS);
    tensor_why(m->input, DTYPE_REASON_DATA, NULL, NULL, 0);
    upload(&(values_job){.r = r, .m = m, .t = m->input}, input_values);
}

/* the target's values: the labels or values drawn at init, or the target file's */
static void *target_values(void *ctx)
{
    const values_job *j = ctx;
    const case_config *cfg = j->r->cfg;
    model *m = j->m;
    if (j->t->dtype == DTYPE_INT64) {
        int64_t *l = cfg->target == TARGET_FILE
                         ? model_file_rows(j->r, cfg->target_path, 0, j->t, true)
                         : m->labels;
        m->labels = NULL;
        return l;
    }
    float *v = cfg->target == TARGET_FILE ? model_file_rows(j->r, cfg->target_path, 0, j->t, false)
                                          : m->target_values;
    m->target_values = NULL;
    return in_dtype(j, v);
}

tensor *model_target(run *r, model *m, const tensor *out)
{
    const case_config *cfg = r->cfg;
    if (m->target)
        return m->target;
    bool labels = loss_def_of(cfg->loss)->class_target;
    dtype dt = labels                             ? DTYPE_INT64
               : cfg->target == TARGET_RANDN_LIKE ? out->dtype
                                                  : DTYPE_FLOAT32;
    /* labels: out's shape less its last dim (the classes): [B], or [B, T] as y.view(-1) */
    m->target = run_tensor(r, "target", dt, labels ? out->ndim - 1 : out->ndim, out->shape,
                           MEM_INPUTS);
    tensor_why(m->target, DTYPE_REASON_DATA, NULL, NULL, 0);
    upload(&(values_job){.r = r, .m = m, .t = m->target}, target_values);
    return m->target;
}

void model_free_host(model *m)
{
    free(m->labels);
    free(m->target_values);
    m->labels = NULL;
    m->target_values = NULL;
}

tensor *model_forward(run *r, model *m)
{
    const case_config *cfg = r->cfg;
    /* each layer's output lives until its last consumer has run (the model's output, the
     * last layer's, is returned), as Python's references hold them in a forward */
    tensor *outs[CASE_MAX_LAYERS];
    int last_use[CASE_MAX_LAYERS];
    for (int i = 0; i < cfg->n_layers; i++) {
        last_use[i] = i == cfg->n_layers - 1 ? cfg->n_layers : i;
        for (int j = 0; j < i; j++)
            for (int k = 0; k < cfg->layers[i].n_inputs; k++)
                if (cfg->layers[i].inputs[k] == j)
                    last_use[j] = i;
    }
    for (int i = 0; i < cfg->n_layers; i++) {
        const layer_spec *l = &cfg->layers[i];
        tensor *in[LAYER_MAX_INPUTS];
        for (int k = 0; k < l->n_inputs; k++)
            in[k] = l->inputs[k] == LAYER_INPUT ? m->input : outs[l->inputs[k]];
        /* autocast=no: `with torch.autocast(device_type, enabled=False)` around the layer;
         * leaving it does not clear the cache of parameter copies (the outer region's
         * nesting count stays above 0: torch/amp/autocast_mode.py's __exit__) */
        bool autocast = r->autocast;
        r->autocast = autocast && !l->autocast_disabled;
        outs[i] = layer_def_of(l->kind)->forward(r, l, in, m->layer_params[i]);
        r->autocast = autocast;
        for (int j = 0; j <= i; j++)
            if (last_use[j] == i) {
                tensor_release(&r->pool, outs[j]);
                outs[j] = NULL;
            }
    }
    return outs[cfg->n_layers - 1];
}
