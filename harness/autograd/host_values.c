/* host_values.c: tensors' values on the host (see host_values.h). */
#include "host_values.h"

#include <stdlib.h>

bool host_values_dry(const run *r) { return r->obs->dump_dry; }

float *host_values_get(run *r, const tensor *t)
{
    size_t bytes = (size_t)tensor_bytes(t);
    float *v = malloc(sizeof(float) * (size_t)(t->numel ? t->numel : 1));
    void *raw = malloc(bytes ? bytes : 1);
    if (!v || !raw) {
        free(v), free(raw);
        run_fail(r, "out of host memory for %s (%lld values)", t->name, (long long)t->numel);
    }
    if (host_values_dry(r)) {
        for (int64_t i = 0; i < t->numel; i++)
            v[i] = 0.0f;
    } else {
        r->be->download(r->be, raw, t->data, (int64_t)bytes);
        for (int64_t i = 0; i < t->numel; i++)
            v[i] = load_as_float(raw, t->dtype, i);
    }
    free(raw);
    return v;
}

void host_values_put(run *r, tensor *t, const float *v, round_stats *st)
{
    if (host_values_dry(r))
        return;
    size_t bytes = (size_t)tensor_bytes(t);
    void *raw = malloc(bytes ? bytes : 1);
    if (!raw)
        run_fail(r, "out of host memory for %s (%zu bytes)", t->name, bytes);
    float min_normal = dtype_min_normal(t->dtype);
    for (int64_t i = 0; i < t->numel; i++) {
        float post = store_from_float(raw, t->dtype, i, v[i]);
        if (st) {
            st->numel++;
            round_tally(&st->counts, v[i], post, min_normal);
            st->hist[hist_bin(v[i])]++;
        }
    }
    r->be->upload(r->be, t->data, raw, (int64_t)bytes);
    free(raw);
}
