/* report/rows.c: what a run's record says, for the reports (see report/rows.h). */
#include "rows.h"

#include <limits.h>
#include <math.h>
#include <string.h>

#include "core/format.h"

bool row_is_backward_grad(const record_tensor *r)
{
    return r->pass == PASS_BACKWARD && (r->role == ROLE_GRAD_ACTIVATION ||
                                        r->role == ROLE_GRAD_CAST || r->role == ROLE_GRAD_PARAM);
}

int64_t report_step_of(const run_record *rec)
{
    int64_t first = -1;
    for (int64_t i = 0; i < rec->n_tensors; i++)
        if (row_is_backward_grad(&rec->tensors[i]) && rec->tensors[i].counted)
            return rec->tensors[i].step;
    for (int64_t i = 0; i < rec->n_tensors; i++)
        if (first < 0 || rec->tensors[i].step < first)
            first = rec->tensors[i].step;
    return first;
}

bool report_has_hist_plot(const run_record *rec)
{
    for (int64_t i = 0; i < rec->n_tensors; i++)
        if (row_is_backward_grad(&rec->tensors[i]) && rec->tensors[i].counted)
            return true;
    return false;
}

const record_tensor *report_row(const run_record *rec, int64_t step, pass_kind pass,
                                const char *name)
{
    for (int64_t i = 0; i < rec->n_tensors; i++) {
        const record_tensor *r = &rec->tensors[i];
        if (r->step == step && r->pass == pass && !strcmp(r->name, name))
            return r;
    }
    return NULL;
}

const record_step *report_step_row(const run_record *rec, int64_t step)
{
    for (int64_t i = 0; i < rec->n_steps; i++)
        if (rec->steps[i].step == step)
            return &rec->steps[i];
    return NULL;
}

bool report_step_scale(const run_record *rec, int64_t step, int *log2_scale)
{
    const record_step *s = report_step_row(rec, step);
    if (!s || !report_row(rec, step, PASS_FORWARD, "loss.scaled") || !(s->loss_scale > 0))
        return false;
    int e;
    double m = frexp((double)s->loss_scale, &e);
    *log2_scale = e - 1;
    return m == 0.5;
}

int64_t report_hist_below(const run_record *rec, int64_t step, int shift)
{
    int64_t below = 0;
    for (int64_t i = 0; i < rec->n_tensors; i++) {
        const record_tensor *r = &rec->tensors[i];
        const format_info *f = format_of(r->dtype);
        if (r->step != step || !row_is_backward_grad(r) || !dtype_is_half(r->dtype) || !f)
            continue;
        const record_bin *b = record_bins_of(rec, r);
        for (int k = 0; k < r->n_bins; k++) /* the zero, inf and nan bins are no exponent */
            if (b[k].bin != HIST_ZERO && b[k].bin != HIST_INF && b[k].bin != HIST_NAN &&
                b[k].bin + HIST_MIN_EXP + shift <= f->zero_bin_max)
                below += b[k].count;
    }
    return below;
}
