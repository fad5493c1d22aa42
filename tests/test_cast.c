/*
 * test_cast.c: explicit casts (`to`), softmax's dtype= and autocast-disabled layers
 * (`autocast=no`), against PyTorch: tests/references/casts.csv, which
 * tools/cast_references.py wrote by running the model of
 * tests/cases/small-graph-casts-autocast.case on fake CUDA tensors through the CUDA autocast
 * dispatcher (float16, bfloat16, off), and by casting values with `.to` on the CPU.
 *  - Every layer output of the case has the dispatcher's dtype in each autocast setting,
 *    every gradient the dtype of its tensor (the engine's validate_outputs), and `to` made
 *    a copy (a row of its own) exactly where PyTorch's `to` did not return its input.
 *  - `to float16` / `to bfloat16` round as PyTorch's `.to` does (ties to even, overflow to
 *    inf, subnormals), and ToCopyBackward0's gradient is the upstream gradient cast back to
 *    float32, bit for bit.
 *  - A `to` of the dtype its input has is its input (TensorConversions.cpp's to_impl returns
 *    self): no new bytes, no node, and the gradient passes unchanged.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/run.h"
#include "helpers.h"
#include "layers/layer.h"

#define REFERENCE "tests/references/casts.csv"
#define CASE "tests/cases/small-graph-casts-autocast.case"

/* the forward row of tensor `name` in a tensors.csv, or NULL */
static char **forward_row(const csv *t, const char *name)
{
    return csv_find(t, "pass", "forward", "tensor", name, NULL, NULL);
}

static void check_config(const csv *ref, const char *config)
{
    char out[256], path[1024], set[64];
    make_temp_dir(out, sizeof out);
    snprintf(set, sizeof set, "precision.autocast=%s", config);
    const char *sets[] = {set};
    case_result res;
    run_case_file_set(CASE, sets, 1, out, &res, NULL);
    snprintf(path, sizeof path, "%s/%.200s/tensors.csv", out, res.name);
    csv t;
    cr_assert(csv_read(path, &t), "%s", path);
    int k_kind = csv_col(ref, "kind"), k_config = csv_col(ref, "config"),
        k_tensor = csv_col(ref, "tensor"), k_dtype = csv_col(ref, "dtype"),
        k_value = csv_col(ref, "value");
    int t_dtype = csv_col(&t, "dtype");
    /* a `to` of the dtype its input has is that input (no row of its own) where PyTorch's
     * `to` returned its input, else a copy */
    for (int i = 0; i < ref->n_rows; i++) {
        char **row = ref->rows[i];
        if (strcmp(row[k_config], config) != 0 || strcmp(row[k_kind], "alias") != 0)
            continue;
        bool aliased = !strcmp(row[k_value], "yes"), own = forward_row(&t, row[k_tensor]);
        cr_expect_eq(own, !aliased, "autocast %s: %s is %s in the harness; PyTorch's to %s",
                     config, row[k_tensor], own ? "a copy" : "its input",
                     aliased ? "returned its input" : "made a copy");
    }
    int seen = 0;
    for (int i = 0; i < ref->n_rows; i++) {
        char **row = ref->rows[i];
        if (strcmp(row[k_config], config) != 0 || strcmp(row[k_kind], "dtype") != 0)
            continue;
        const char *name = row[k_tensor];
        char **alias = csv_find(ref, "kind", "alias", "config", config, "tensor", name);
        if (alias && !strcmp(alias[k_value], "yes"))
            continue; /* no row of its own: its input's is checked */
        char **got = forward_row(&t, name);
        cr_assert_not_null(got, "autocast %s: no forward row for %s", config, name);
        seen++;
        cr_expect_str_eq(got[t_dtype], row[k_dtype], "autocast %s: %s is %s, PyTorch's %s",
                         config, name, got[t_dtype], row[k_dtype]);
        char grad[160];
        snprintf(grad, sizeof grad, "%s.grad", name);
        char **g = csv_find(&t, "pass", "backward", "tensor", grad, NULL, NULL);
        if (g)
            cr_expect_str_eq(g[t_dtype], row[k_dtype], "autocast %s: %s is %s, its tensor %s",
                             config, grad, g[t_dtype], row[k_dtype]);
    }
    cr_expect_gt(seen, 10, "autocast %s: %d dtype rows in " REFERENCE, config, seen);
    csv_free(&t);
    rm_rf(out);
}

Test(cast, every_layer_output_has_the_cuda_autocast_dispatcher_s_dtype, .timeout = 120)
{
    csv ref;
    cr_assert(csv_read(REFERENCE, &ref), "cannot read %s", REFERENCE);
    check_config(&ref, "float16");
    check_config(&ref, "bfloat16");
    check_config(&ref, "off");
    csv_free(&ref);
}

/* the "|"-joined hex floats of the reference's `to` row (config, tensor) into v */
static int ref_values(const csv *ref, const char *config, const char *tensor, float *v, int max)
{
    char **row = csv_find(ref, "kind", "to", "config", config, "tensor", tensor);
    cr_assert_not_null(row, REFERENCE ": no row to,%s,%s", config, tensor);
    char *text = strdup(row[csv_col(ref, "value")]), *save = NULL;
    int n = 0;
    for (char *p = strtok_r(text, "|", &save); p && n < max; p = strtok_r(NULL, "|", &save))
        v[n++] = strtof(p, NULL);
    free(text);
    return n;
}

static run *r;
static void run_open(void) { r = test_run_open(); }
static void run_close(void) { test_run_close(r); }

/* what the consumer of a `to` hands back as its gradient */
static const float *upstream;

static void consumer_backward(run *rr, node *n)
{
    tensor *g = node_grad_tensor(rr, n, 0);
    for (int64_t i = 0; i < g->numel; i++)
        store_from_float(g->data, g->dtype, i, upstream[i]);
    node_give_grad(rr, n, 0, g, NULL);
}

/* `y = to DTYPE` of x, its output read by a node (output *z) that hands back dy */
static tensor *to_then_consumer(tensor *x, dtype dt, const float *dy, tensor **z)
{
    layer_spec l = {.name = "y", .kind = LAYER_TO, .n_inputs = 1, .tied = -1};
    l.opt_int[0] = dt;
    tensor *in[] = {x};
    tensor *y = layer_def_of(LAYER_TO)->forward(r, &l, in, NULL);
    int64_t one = 1;
    *z = run_tensor(r, "z", DTYPE_FLOAT32, 1, &one, MEM_ACTIVATIONS);
    tape_record(r, "consumer", consumer_backward, *z, &y, 1);
    upstream = dy;
    return y;
}

Test(cast, to_rounds_and_its_gradient_casts_back_as_pytorch_s_to, .init = run_open,
     .fini = run_close)
{
    csv ref;
    cr_assert(csv_read(REFERENCE, &ref), "cannot read %s", REFERENCE);
    static const char *const dts[] = {"float16", "bfloat16"};
    for (int d = 0; d < 2; d++) {
        float x[64], y[64], dy[64], dx[64];
        int n = ref_values(&ref, dts[d], "x", x, 64);
        cr_assert_eq(ref_values(&ref, dts[d], "y", y, 64), n);
        cr_assert_eq(ref_values(&ref, dts[d], "dy", dy, 64), n);
        cr_assert_eq(ref_values(&ref, dts[d], "dx", dx, 64), n);
        int64_t shape = n;
        tensor *p = run_tensor(r, "p", DTYPE_FLOAT32, 1, &shape, MEM_PARAMS);
        for (int i = 0; i < n; i++)
            store_from_float(p->data, DTYPE_FLOAT32, i, x[i]);
        p->requires_grad = p->is_leaf = true;
        tensor *z;
        tensor *out = to_then_consumer(p, dtype_named(dts[d]), dy, &z);
        cr_assert_eq(out->dtype, dtype_named(dts[d]));
        for (int i = 0; i < n; i++)
            cr_expect(!memcmp(&(float){tensor_at(out, i)}, &y[i], sizeof(float)),
                      "%s: to(%a) = %a, PyTorch's %a", dts[d], x[i], tensor_at(out, i), y[i]);
        tape_backward(r, z, 1.0f);
        cr_assert_not_null(p->grad, "%s: no gradient reached the float32 source", dts[d]);
        cr_assert_eq(p->grad->dtype, DTYPE_FLOAT32);
        for (int i = 0; i < n; i++)
            cr_expect(!memcmp(&(float){tensor_at(p->grad, i)}, &dx[i], sizeof(float)),
                      "%s: ToCopyBackward0 of %a = %a, PyTorch's %a", dts[d], dy[i],
                      tensor_at(p->grad, i), dx[i]);
    }
    csv_free(&ref);
}

/* TensorConversions.cpp's to_impl: `if (to_will_alias(...)) return self;` */
Test(cast, to_of_the_dtype_it_has_is_its_input_as_tensor_conversions_cpp_returns_self,
     .init = run_open, .fini = run_close)
{
    static const float x[] = {0.1f, -3.0f, 1e-6f, 65504.0f};
    static const float dy[] = {1.0f, 0x1p-20f, -2.5f, 0x1p-24f};
    int64_t n = 4;
    tensor *p = run_tensor(r, "p", DTYPE_FLOAT32, 1, &n, MEM_PARAMS);
    for (int i = 0; i < 4; i++)
        store_from_float(p->data, DTYPE_FLOAT32, i, x[i]);
    p->requires_grad = p->is_leaf = true;
    /* h = p.half(), a real cast; y = h.to(torch.float16), h itself */
    layer_spec l = {.name = "h", .kind = LAYER_TO, .n_inputs = 1, .tied = -1};
    l.opt_int[0] = DTYPE_FLOAT16;
    tensor *in[] = {p};
    tensor *h = layer_def_of(LAYER_TO)->forward(r, &l, in, NULL);
    int64_t before = r->account.total;
    int nodes = r->n_nodes;
    tensor *z;
    tensor *y = to_then_consumer(h, DTYPE_FLOAT16, dy, &z);
    cr_expect_eq(r->account.total - before, (int64_t)sizeof(float),
                 "the alias took %lld bytes (only z's 4 expected)",
                 (long long)(r->account.total - before));
    cr_expect_eq(y, h, "y is not h itself");
    cr_expect_eq(r->n_nodes, nodes + 1, "to made a node (only the consumer's expected)");
    tape_backward(r, z, 1.0f);
    cr_assert_not_null(p->grad);
    for (int i = 0; i < 4; i++) /* dy in float16, then h's ToCopyBackward0 to float32 */
        cr_expect_eq(tensor_at(p->grad, i), dy[i], "p.grad[%d] = %a, not dy = %a", i,
                     tensor_at(p->grad, i), dy[i]);
}
