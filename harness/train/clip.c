/* clip.c: clip_grad_norm_ and clip_grad_value_ (see clip.h; torch/nn/utils/clip_grad.py). */
#include "clip.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "autograd/host_values.h"

double clip_vector_norm(const float *v, int64_t n, double p)
{
    double acc = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double a = fabs((double)v[i]);
        if (isnan(a))
            return NAN;
        if (isinf(p))
            acc = a > acc ? a : acc;
        else
            acc += p == 2.0 ? a * a : p == 1.0 ? a : pow(a, p);
    }
    if (isinf(p) || p == 1.0)
        return acc;
    return p == 2.0 ? sqrt(acc) : pow(acc, 1.0 / p);
}

/* torch.stack's result dtype for norms of these dtypes (torch.result_type of tensors) */
static dtype promoted(dtype a, dtype b)
{
    return a == b ? a : DTYPE_FLOAT32; /* float16 with bfloat16, or either with float32 */
}

/* "2.0", "inf": the norm type as Python's f-string prints the float */
static void python_float(double x, char *buf, int len)
{
    if (isinf(x))
        snprintf(buf, (size_t)len, "inf");
    else if (x == floor(x) && fabs(x) < 1e16)
        snprintf(buf, (size_t)len, "%.1f", x);
    else /* the shortest text that reads back as x, as Python's repr */
        for (int digits = 1; digits <= 17; digits++) {
            snprintf(buf, (size_t)len, "%.*g", digits, x);
            if (strtod(buf, NULL) == x)
                break;
        }
}

clip_result clip_grad_norm(run *r, tensor *const *grads, int n, tensor_role role)
{
    const case_config *cfg = r->cfg;
    double p = cfg->norm_type;
    float norms[2 * CASE_MAX_LAYERS];
    int n_norms = 0;
    dtype total_dt = DTYPE_COUNT;
    bool dry = host_values_dry(r); /* the preflight: no values (every norm 0) */
    for (int i = 0; i < n; i++) {
        if (!grads[i])
            continue;
        float *v = dry ? NULL : host_values_get(r, grads[i]);
        norms[n_norms++] =
            dry ? 0.0f : round_to((float)clip_vector_norm(v, grads[i]->numel, p), grads[i]->dtype);
        free(v);
        total_dt = total_dt == DTYPE_COUNT ? grads[i]->dtype : promoted(total_dt, grads[i]->dtype);
    }
    clip_result res = {.total_norm = 0.0, .clip_coef = 1.0};
    if (n_norms == 0) /* no gradients: PyTorch returns tensor(0.) and clips nothing */
        return res;
    float total = round_to((float)clip_vector_norm(norms, n_norms, p), total_dt);
    res.total_norm = total;
    if (cfg->error_if_nonfinite && !isfinite(total)) {
        char order[64];
        python_float(p, order, sizeof order);
        run_fail(r,
                 "RuntimeError: The total norm of order %s for gradients from `parameters` is "
                 "non-finite, so it cannot be clipped. To disable this error and scale the "
                 "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`",
                 order);
    }
    float denom = round_to(total + 1e-6f, total_dt);
    float coef = round_to((float)cfg->clip_grad_norm / denom, total_dt);
    if (coef > 1.0f) /* torch.clamp(max=1.0); a NaN coefficient stays NaN */
        coef = 1.0f;
    res.clip_coef = coef;
    for (int i = 0; i < n; i++) {
        if (!grads[i])
            continue;
        round_stats st;
        round_stats *stp = run_stats(r, &st);
        run_check(r, r->be->mul_scalar(r->be, grads[i], coef, grads[i], stp));
        observe_tensor(r->obs, grads[i], role, stp);
    }
    return res;
}

void clip_grad_value(run *r, tensor *const *grads, int n, tensor_role role)
{
    float v = (float)r->cfg->clip_grad_value;
    for (int i = 0; i < n && !host_values_dry(r); i++) {
        if (!grads[i])
            continue;
        float *x = host_values_get(r, grads[i]);
        for (int64_t k = 0; k < grads[i]->numel; k++)
            if (!isnan(x[k]))
                x[k] = x[k] < -v ? -v : x[k] > v ? v : x[k];
        round_stats st;
        round_stats *stp = run_stats(r, &st);
        host_values_put(r, grads[i], x, stp);
        free(x);
        observe_tensor(r->obs, grads[i], role, stp);
    }
}
