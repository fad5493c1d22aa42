/*
 * report/case.c: a case's report.md (see report.h), from its record alone: its
 * configuration, result, rows and histograms. Numbers are either the record's values as
 * the CSV files print them (amax, loss, loss_scale: %.9g) or computed from its integer
 * counts, rounded as report/text.h says.
 */
#include "report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <math.h>

#include "allreduce.h"
#include "config.h"
#include "core/format.h"
#include "fp8.h"
#include "reasons.h"
#include "rows.h"
#include "text.h"

#define STEPS_TABLE_MAX 20 /* report.md lists every step up to this many */
#define SKIPS_LISTED 10    /* and names this many skipped steps */
#define NONFINITE_LISTED 8 /* and this many tensor rows with inf or NaN */

/* "a", "a and b", "a, b and c", each in backticks */
static void put_names(FILE *f, const record_tensor *const *rows, int n, bool strip_grad)
{
    for (int i = 0; i < n; i++) {
        const char *name = rows[i]->name;
        int len = (int)strlen(name);
        if (strip_grad && len > 5 && !strcmp(name + len - 5, ".grad"))
            len -= 5;
        fprintf(f, "%s`%.*s`", i == 0 ? "" : i + 1 < n ? ", " : " and ", len, name);
    }
}

/* "float32|float16" as "float32 and float16" */
static void put_dtype_set(FILE *f, const char *set)
{
    for (; *set; set++) {
        if (*set == '|')
            fputs(" and ", f);
        else
            fputc(*set, f);
    }
}

typedef struct case_report {
    const record_config *cfg;
    const case_result *res;
    const run_record *rec;
    int64_t step;      /* the step the answer describes; -1: no rows */
    bool scaled_count; /* the GradScaler paragraph has the counts below */
    int log2_scale;
    int64_t would_underflow, half_grad_numel, half_grad_underflow;
} case_report;

/* PyTorch's side of the errors the harness reproduces, found by a piece of their message. */
static const struct {
    const char *needle, *text;
} pytorch_errors[] = {
    {"Attempting to unscale FP16 gradients",
     "PyTorch raises this ValueError in `GradScaler.unscale_()` (which `scaler.step()` calls) "
     "when a parameter's `.grad` is float16, as it is for a `.half()` model: it refuses to "
     "unscale float16 gradients in place. Keep the parameters in float32 and let autocast "
     "compute in float16 (the float32 `.grad` then receives the float16 gradients cast up), "
     "or give the optimizer float32 master weights."},
    {"not implemented for 'BFloat16'",
     "PyTorch's `GradScaler.unscale_()` has no bfloat16 kernel and raises this error for "
     "bfloat16 gradients. bfloat16 has float32's exponent range and needs no loss scaling: "
     "drop the GradScaler, or keep float32 parameters."},
    {"must have the same dtype",
     "PyTorch's matrix multiply (`torch.nn.functional.linear`) raises this RuntimeError when "
     "its operands' dtypes differ outside autocast: it never casts implicitly. Cast the input "
     "to the weight's dtype, or run the forward pass under autocast, which casts both "
     "operands to its dtype."},
    {"should be the same",
     "PyTorch's `conv2d` raises this RuntimeError when the input's and the weight's (or "
     "bias's) dtypes differ outside autocast. Cast the input, or run under autocast."},
    {"does not require grad",
     "PyTorch raises this RuntimeError in `backward()` when nothing the loss depends on "
     "requires a gradient."},
};

static void put_rounding_note(FILE *f)
{
    fputs("Numbers are copied from this folder's CSV files or counted from them. Percentages "
          "are 100 × count / total, printed with two decimals (printf `%.2f`, round to "
          "nearest); a count of 0 prints as 0, a non-zero count that would print as 0.00% "
          "prints as <0.01%, and one short of the total that would print as 100.00% as "
          ">99.99%. MiB = bytes / 2^20, two decimals.\n\n",
          f);
}

/* "In step S, U of N values (p) underflowed to zero: a p1 (u1), ...; K (q) are subnormal." */
static void put_losses(FILE *f, const record_tensor *const *rows, int n, int64_t step,
                       const char *where)
{
    int64_t under = 0, sub = 0, numel = 0;
    for (int i = 0; i < n; i++) {
        under += rows[i]->underflow;
        sub += rows[i]->subnormal;
        numel += rows[i]->numel;
    }
    char share[96];
    format_share(under, numel, share, sizeof share);
    fprintf(f, " In step %lld, %s values %s underflowed to zero%s", (long long)step, share, where,
            under ? ":" : "");
    bool first = true;
    for (int i = 0; i < n; i++) {
        if (!rows[i]->underflow)
            continue;
        format_share(rows[i]->underflow, rows[i]->numel, share, sizeof share);
        fprintf(f, "%s `%s` %s", first ? "" : ",", rows[i]->name, share);
        first = false;
    }
    format_share(sub, numel, share, sizeof share);
    fprintf(f,
            "; %s are subnormal (non-zero, below the smallest normal: fewer significant "
            "bits).",
            share);
}

/* The copy autocast made of a parameter whose gradient row is g: the backward pass's
 * grad_cast row "<param>@<dtype>.grad"; NULL when none. */
static const record_tensor *param_copy_grad(const run_record *rec, const record_tensor *g)
{
    size_t base = strlen(g->name);
    if (base <= 5 || strcmp(g->name + base - 5, ".grad"))
        return NULL;
    base -= 5;
    for (int64_t j = 0; j < rec->n_tensors; j++) {
        const record_tensor *r = &rec->tensors[j];
        size_t len = strlen(r->name);
        if (r->step == g->step && r->pass == PASS_BACKWARD && r->role == ROLE_GRAD_CAST &&
            !strncmp(r->name, g->name, base) && r->name[base] == '@' && len > 5 &&
            !strcmp(r->name + len - 5, ".grad"))
            return r;
    }
    return NULL;
}

/* The gradient of an fp8 layer's weight as te.Linear's wgrad GEMM made it, before the cast
 * into the parameter's dtype: the backward pass's grad_cast row "<param>.grad@<dtype>"
 * beside the gradient row g "<param>.grad" (fp8_linear.h); NULL when none. */
static const record_tensor *fp8_wgrad(const run_record *rec, const record_tensor *g)
{
    size_t n = strlen(g->name);
    for (int64_t j = 0; j < rec->n_tensors; j++) {
        const record_tensor *r = &rec->tensors[j];
        if (r->step == g->step && r->pass == PASS_BACKWARD && r->role == ROLE_GRAD_CAST &&
            !strncmp(r->name, g->name, n) && r->name[n] == '@')
            return r;
    }
    return NULL;
}

/* true when copy, the row param_copy_grad or fp8_wgrad found for g, is fp8_wgrad's */
static bool is_fp8_wgrad(const record_tensor *g, const record_tensor *copy)
{
    return copy && !strncmp(copy->name, g->name, strlen(g->name));
}

/* The dtype of fp8 layer L's quantized copy "L.<operand>@<dtype>" in the step of the weight
 * gradient row g ("L.weight.grad"); NULL when the step has none. */
static const char *fp8_operand_dtype(const run_record *rec, const record_tensor *g,
                                     const char *operand)
{
    size_t layer = strlen(g->name) - strlen(".weight.grad");
    for (int64_t j = 0; j < rec->n_tensors; j++) {
        const record_tensor *r = &rec->tensors[j];
        size_t m = strlen(operand);
        if (r->step == g->step && !strncmp(r->name, g->name, layer) && r->name[layer] == '.' &&
            !strncmp(r->name + layer + 1, operand, m) && r->name[layer + 1 + m] == '@')
            return dtype_name(r->dtype);
    }
    return NULL;
}

/* true when parameters i and j had their gradients made the same way */
static bool same_way(const record_tensor *const *grads, const record_tensor *const *copies, int i, int j)
{
    if (!copies[i] != !copies[j] || grads[i]->dtype != grads[j]->dtype ||
        is_fp8_wgrad(grads[i], copies[i]) != is_fp8_wgrad(grads[j], copies[j]))
        return false;
    return !copies[i] || copies[i]->dtype == copies[j]->dtype;
}

/* " The gradients of ... were computed in D by te.Linear's weight-gradient GEMM ...": the
 * fp8 layers' weights of a group, their wgrad GEMM outputs in wgrads */
static void put_fp8_wgrads(FILE *f, const case_report *cr, const record_tensor *const *grads,
                           const record_tensor *const *wgrads, int m)
{
    const char *dy = fp8_operand_dtype(cr->rec, grads[0], "out.grad");
    const char *x = fp8_operand_dtype(cr->rec, grads[0], "input");
    fputs(" The gradients of ", f);
    put_names(f, grads, m, true);
    fprintf(f, " were computed in %s (", dtype_name(wgrads[0]->dtype));
    put_names(f, wgrads, m, false);
    fputs(") by te.Linear's weight-gradient GEMM, whose operands were float8", f);
    if (dy && x)
        fprintf(f, " (the output gradient in %s, the input in %s)", dy, x);
    fprintf(f, ", and cast to %s into `.grad`.", dtype_name(grads[0]->dtype));
    if (dtype_is_half(wgrads[0]->dtype) && !dtype_is_half(grads[0]->dtype))
        fputs(" The cast up is exact: what the half-precision GEMM output lost stays lost.", f);
    put_losses(f, wgrads, m, cr->step, "of these GEMM outputs");
}

/* The paragraph on parameter gradients, one sentence per way they were made. buf holds
 * 4 * rec->n_tensors pointers. */
static void put_param_grads(FILE *f, const case_report *cr, const record_tensor **buf)
{
    const run_record *rec = cr->rec;
    const record_tensor **grads = buf, **copies = buf + rec->n_tensors;
    const record_tensor **group_grads = buf + 2 * rec->n_tensors, **group_copies = buf + 3 * rec->n_tensors;
    fputs("**Parameter gradients (`.grad`): ", f);
    if (!cr->res->param_grad_dtypes[0]) {
        fputs("none.** The run ended before a backward pass made them.\n\n", f);
        return;
    }
    put_dtype_set(f, cr->res->param_grad_dtypes);
    fputs(".**", f);
    int n = 0;
    for (int64_t i = 0; i < rec->n_tensors; i++) {
        const record_tensor *g = &rec->tensors[i];
        if (g->step == cr->step && g->pass == PASS_BACKWARD && g->role == ROLE_GRAD_PARAM) {
            grads[n] = g;
            copies[n] = param_copy_grad(rec, g);
            if (!copies[n])
                copies[n] = fp8_wgrad(rec, g);
            n++;
        }
    }
    for (int i = 0; i < n; i++) {
        bool told = false;
        for (int k = 0; k < i && !told; k++)
            told = same_way(grads, copies, i, k);
        if (told)
            continue;
        int m = 0;
        for (int j = i; j < n; j++)
            if (same_way(grads, copies, i, j)) {
                group_grads[m] = grads[j];
                group_copies[m++] = copies[j];
            }
        if (is_fp8_wgrad(grads[i], copies[i])) {
            put_fp8_wgrads(f, cr, group_grads, group_copies, m);
            continue;
        }
        fputs(" The gradients of ", f);
        put_names(f, group_grads, m, true);
        if (copies[i]) {
            fprintf(f,
                    " were computed in %s, as the gradients of autocast's %s copies of the "
                    "parameters (",
                    dtype_name(copies[i]->dtype), dtype_name(copies[i]->dtype));
            put_names(f, group_copies, m, false);
            fprintf(f, "), and cast to %s when autograd accumulated them into `.grad`.",
                    dtype_name(grads[i]->dtype));
            if (dtype_is_half(copies[i]->dtype) && !dtype_is_half(grads[i]->dtype))
                fputs(" The cast up is exact: what the half-precision computation lost stays "
                      "lost.",
                      f);
            put_losses(f, group_copies, m, cr->step, "of these copies' gradients");
        } else {
            fprintf(f, " were computed directly in %s: autocast made no copy of %s.",
                    dtype_name(grads[i]->dtype), m == 1 ? "this parameter" : "these parameters");
            if (dtype_is_half(grads[i]->dtype))
                put_losses(f, group_grads, m, cr->step, "of these gradients");
        }
    }
    fputs("\n\n", f);
}

/* For a float8 case, the share of "In all" that te.Linear's quantized output gradients
 * (grad_cast rows in a float8 dtype: "L.out.grad@float8_e5m2") hold: they are gradients cast
 * (after scaling), so grad_underflow counts them; nothing without such rows. */
static void put_fp8_grad_copies(FILE *f, const run_record *rec)
{
    int64_t under = 0, numel = 0;
    const record_tensor *first = NULL;
    for (int64_t i = 0; i < rec->n_tensors; i++) {
        const record_tensor *r = &rec->tensors[i];
        if (r->counted && r->pass == PASS_BACKWARD && r->role == ROLE_GRAD_CAST &&
            dtype_is_float8(r->dtype)) {
            first = first ? first : r;
            under += r->underflow;
            numel += r->numel;
        }
    }
    if (!first)
        return;
    char share[96];
    format_share(under, numel, share, sizeof share);
    fprintf(f,
            " They include the float8 copies the fp8 layers quantized their output gradients "
            "into (`%s` and the like: multiplied by their scale, then cast), %s of whose "
            "values underflowed.",
            first->name, share);
}

/* Collects into buf the step's optimizer-pass rows of a role, each name once; returns n. */
static int optimizer_rows(const run_record *rec, int64_t step, tensor_role role,
                          const record_tensor **buf)
{
    int n = 0;
    for (int64_t i = 0; i < rec->n_tensors; i++) {
        const record_tensor *r = &rec->tensors[i];
        bool seen = false;
        for (int k = 0; k < n && !seen; k++)
            seen = !strcmp(buf[k]->name, r->name);
        if (!seen && r->step == step && r->pass == PASS_OPTIMIZER && r->role == role)
            buf[n++] = r;
    }
    return n;
}

/* With master weights: where the gradients went after backward. buf holds 2 * rec->n_tensors. */
static void put_master(FILE *f, const case_report *cr, const record_tensor **buf)
{
    const record_tensor **grads = buf, **masters = buf + cr->rec->n_tensors;
    int n = optimizer_rows(cr->rec, cr->step, ROLE_GRAD_MASTER, grads);
    int m = optimizer_rows(cr->rec, cr->step, ROLE_MASTER_PARAM, masters);
    if (n == 0)
        return;
    fprintf(f, "**Master weights:** the optimizer copied these gradients to %s (",
            dtype_name(grads[0]->dtype));
    put_names(f, grads, n, false);
    fputs(")", f);
    if (m) {
        fprintf(f, " and updated its %s master copies of the parameters with them (",
                dtype_name(masters[0]->dtype));
        put_names(f, masters, m, false);
        fprintf(f, "), then rounded these back into the %s parameters",
                dtype_name(cr->cfg->params));
    }
    fputs(".\n\n", f);
}

/* The paragraph on activation gradients, by dtype, and the casts between them. */
static void put_activation_grads(FILE *f, const case_report *cr, const record_tensor **buf)
{
    const run_record *rec = cr->rec;
    /* the half dtypes first (the losses below are told for them) */
    static const dtype dtypes[] = {DTYPE_FLOAT16, DTYPE_BFLOAT16, DTYPE_FLOAT32};
    fputs("**Activation gradients:**", f);
    bool any = false;
    for (int d = 0; d < (int)(sizeof dtypes / sizeof dtypes[0]); d++) {
        int n = 0;
        for (int64_t i = 0; i < rec->n_tensors; i++) {
            const record_tensor *r = &rec->tensors[i];
            if (r->step == cr->step && r->pass == PASS_BACKWARD &&
                r->role == ROLE_GRAD_ACTIVATION && r->dtype == dtypes[d])
                buf[n++] = r;
        }
        if (n == 0)
            continue;
        fprintf(f, "%s %s for ", any ? ";" : "", dtype_name(dtypes[d]));
        put_names(f, buf, n, false);
        any = true;
    }
    fputs(any ? "." : " none in this step.", f);
    /* gradients of autocast's copies of activations, and where they went */
    for (int64_t i = 0; i < rec->n_tensors; i++) {
        const record_tensor *r = &rec->tensors[i];
        const char *at = strchr(r->name, '@');
        if (r->step != cr->step || r->pass != PASS_BACKWARD || r->role != ROLE_GRAD_CAST ||
            !at)
            continue;
        char base[512];
        int len = snprintf(base, sizeof base, "%.*s.grad", (int)(at - r->name), r->name);
        const record_tensor *to = len > 0 && len < (int)sizeof base
                                   ? report_row(rec, cr->step, PASS_BACKWARD, base)
                                   : NULL;
        if (!to || to->role != ROLE_GRAD_ACTIVATION)
            continue;
        fprintf(f,
                " `%s` (%s), the gradient of autocast's %s copy of `%.*s`, was cast to %s "
                "as `%s`.",
                r->name, dtype_name(r->dtype), dtype_name(r->dtype), (int)(at - r->name), r->name,
                dtype_name(to->dtype), to->name);
    }
    for (int d = 0; d < (int)(sizeof dtypes / sizeof dtypes[0]); d++) {
        if (!dtype_is_half(dtypes[d]))
            continue;
        int n = 0;
        for (int64_t i = 0; i < rec->n_tensors; i++) {
            const record_tensor *r = &rec->tensors[i];
            if (r->step == cr->step && r->pass == PASS_BACKWARD &&
                r->role == ROLE_GRAD_ACTIVATION && r->dtype == dtypes[d] &&
                r->counted)
                buf[n++] = r;
        }
        if (n) {
            char where[64];
            snprintf(where, sizeof where, "of the %s activation gradients", dtype_name(dtypes[d]));
            put_losses(f, buf, n, cr->step, where);
        }
    }
    fputs("\n\n", f);
}

static void put_nonfinite(FILE *f, const case_report *cr)
{
    const run_record *rec = cr->rec;
    int n = 0;
    for (int64_t i = 0; i < rec->n_tensors; i++) {
        const record_tensor *r = &rec->tensors[i];
        if (r->step != cr->step || !r->counted ||
            !(r->overflow || r->nan || isinf(r->amax)))
            continue;
        if (n == 0)
            fprintf(f, "**Inf and NaN in step %lld:**", (long long)cr->step);
        if (n++ >= NONFINITE_LISTED)
            continue;
        fprintf(f, "%s `%s` (%s:", n > 1 ? "," : "", r->name, pass_name(r->pass));
        if (r->overflow)
            fprintf(f, " %lld overflowed to inf%s", (long long)r->overflow, r->nan ? "," : "");
        else if (isinf(r->amax))
            fprintf(f, " holds inf%s", r->nan ? "," : "");
        if (r->nan)
            fprintf(f, " %lld NaN", (long long)r->nan);
        fputc(')', f);
    }
    if (n > NONFINITE_LISTED)
        fprintf(f, " and %d more rows (tensors.csv)", n - NONFINITE_LISTED);
    if (n)
        fputs(".\n\n", f);
    else
        fprintf(f, "**Inf and NaN in step %lld:** none.\n\n", (long long)cr->step);
}

static void put_error(FILE *f, const case_report *cr)
{
    const case_result *res = cr->res;
    fprintf(f, "## Error\n\nThe run ended in an error after %lld completed step%s (%s):\n\n    ",
            (long long)cr->rec->n_steps, cr->rec->n_steps == 1 ? "" : "s",
            res->passed ? "the case expects it" : "the case did not expect it");
    for (const char *p = res->error; *p; p++)
        fputc(*p == '\n' || *p == '\r' ? ' ' : *p, f);
    fputs("\n\n", f);
    for (size_t i = 0; i < sizeof pytorch_errors / sizeof pytorch_errors[0]; i++)
        if (strstr(res->error, pytorch_errors[i].needle)) {
            fprintf(f, "What PyTorch does: %s\n\n", pytorch_errors[i].text);
            break;
        }
    fputs("The tables below hold what the run computed before the error.\n\n", f);
}

static void put_scaler(FILE *f, const case_report *cr)
{
    const run_record *rec = cr->rec;
    fputs("## GradScaler\n\n", f);
    if (!cr->cfg->scaler) {
        fputs("None: nothing scaled the loss, so the gradients above have their true size, "
              "and what underflowed in a half-precision rounding is lost.\n\n",
              f);
        return;
    }
    const record_step *s = report_step_row(rec, cr->step);
    char scale[32];
    if (s)
        float_text_g9(s->loss_scale, scale);
    if (s)
        fprintf(f,
                "In step %lld the loss was multiplied by %s (steps.csv `loss_scale`) before "
                "backward (`loss.scaled`), so every gradient of that step's backward pass above "
                "is %s times the true one; `scaler.step()` unscales the %s (multiplies them by "
                "1/%s) and skips the optimizer step when it finds an inf or NaN there.",
                (long long)s->step, scale, scale,
                cr->cfg->master_weights ? "float32 master gradients" : "parameters' `.grad`",
                scale);
    if (cr->scaled_count) {
        char would[96], did[96];
        format_share(cr->would_underflow, cr->half_grad_numel, would, sizeof would);
        format_share(cr->half_grad_underflow, cr->half_grad_numel, did, sizeof did);
        fprintf(f,
                " Divided by the scale, 2^%d, that is at their size without the scaler, %s "
                "values of the step's half-precision gradients would lie below half the "
                "smallest subnormal (2^%d in float16, 2^%d in bfloat16) and round to zero; "
                "with the scaler, %s underflowed (hist.csv, tensors.csv; the lower panel of "
                "hist_grads.png).",
                cr->log2_scale, would, format_of(DTYPE_FLOAT16)->zero_exp,
                format_of(DTYPE_BFLOAT16)->zero_exp, did);
    } else if (cr->step >= 0)
        fprintf(f,
                "steps.csv has no row for step %lld (the run ended in it), so its loss scale "
                "is not recorded.",
                (long long)cr->step);
    if (rec->n_steps == 0) {
        fputs(" No step completed.\n\n", f);
        return;
    }
    const record_step *first = &rec->steps[0], *last = &rec->steps[rec->n_steps - 1];
    int found = 0, skipped = 0, grew = 0, backed_off = 0;
    for (int64_t i = 0; i < rec->n_steps; i++) {
        found += rec->steps[i].found_inf;
        skipped += rec->steps[i].skipped;
        if (i > 0 && rec->steps[i].loss_scale > rec->steps[i - 1].loss_scale)
            grew++;
        if (i > 0 && rec->steps[i].loss_scale < rec->steps[i - 1].loss_scale)
            backed_off++;
    }
    char first_scale[32], last_scale[32];
    float_text_g9(first->loss_scale, first_scale);
    float_text_g9(last->loss_scale, last_scale);
    if (rec->n_steps == 1)
        fprintf(f, "\n\nOver 1 step: loss scale %s", first_scale);
    else
        fprintf(f, "\n\nOver %lld steps: loss scale %s in step %lld and %s in step %lld",
                (long long)rec->n_steps, first_scale, (long long)first->step, last_scale,
                (long long)last->step);
    fprintf(f, "; inf or NaN found in %d step%s, %d skipped", found, found == 1 ? "" : "s",
            skipped);
    for (int64_t i = 0, k = 0; i < rec->n_steps; i++)
        if (rec->steps[i].skipped && k++ < SKIPS_LISTED)
            fprintf(f, "%s step %lld (first non-finite tensor `%s`)", k > 1 ? "," : ":",
                    (long long)rec->steps[i].step, rec->steps[i].first_nonfinite);
    if (skipped > SKIPS_LISTED)
        fprintf(f, " and %d more (steps.csv)", skipped - SKIPS_LISTED);
    fprintf(f,
            "; from one step to the next the scale grew %d time%s and backed off %d time%s."
            "\n\n",
            grew, grew == 1 ? "" : "s", backed_off, backed_off == 1 ? "" : "s");
}

/* The first skipped step's first non-finite tensor, the op that made it, its forward
 * input, and what tensors.csv counted in it when the step was observed. */
static void put_first_nonfinite(FILE *f, const case_report *cr)
{
    const run_record *rec = cr->rec;
    const record_step *s = NULL;
    for (int64_t i = 0; i < rec->n_steps && !s; i++)
        if (rec->steps[i].skipped && rec->steps[i].first_nonfinite[0])
            s = &rec->steps[i];
    if (!s)
        return;
    fprintf(f, "**First non-finite value** (step %lld, the first skipped): `%s`", (long long)s->step,
            s->first_nonfinite);
    if (s->nonfinite_op[0])
        fprintf(f, ", made by the `%s`; its forward input `%s`", s->nonfinite_op,
                s->nonfinite_input);
    for (int64_t i = 0; i < rec->n_tensors; i++) {
        const record_tensor *r = &rec->tensors[i];
        if (r->step != s->step || !r->counted || strcmp(r->name, s->first_nonfinite) != 0)
            continue;
        fprintf(f, " (%s pass: %lld of %lld overflowed to inf, %lld NaN)", pass_name(r->pass),
                (long long)r->overflow, (long long)r->numel, (long long)r->nan);
        break;
    }
    fputs(".\n\n", f);
}

/* accumulation's and clipping's columns of steps.csv, in words */
static void put_accumulation_and_clipping(FILE *f, const case_report *cr)
{
    const run_record *rec = cr->rec;
    const record_config *cfg = cr->cfg;
    if (cfg->accumulate > 1) {
        int64_t lost = 0, lo = INT64_MAX, hi = 0;
        for (int64_t i = 0; i < rec->n_steps; i++) {
            int64_t v = rec->steps[i].lost_accumulations;
            lost += v;
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        bool master = cfg->master_weights && !cfg->delay_unscale;
        fprintf(f,
                "Gradient accumulation: %lld micro-batches of %lld samples per optimizer step "
                "(`loss / %lld` each), %s. Lost accumulations (elements where adding a "
                "micro-batch's non-zero gradient left the sum as it was): %lld in all, %lld to "
                "%lld per step.\n\n",
                (long long)cfg->accumulate, (long long)cfg->batch, (long long)cfg->accumulate,
                master ? "each backward's half gradients copied up, unscaled and added into the "
                         "float32 master gradients (Apex O2's default)"
                : cfg->master_weights
                    ? "accumulated in the half `.grad` and unscaled once (delay_unscale)"
                    : "accumulated in each `.grad`'s own dtype (`grad += new`, rounded at each add)",
                (long long)lost, (long long)lo, (long long)hi);
    }
    if (cfg->clip_grad_norm > 0 && rec->n_steps > 0) {
        int clipped = 0;
        for (int64_t i = 0; i < rec->n_steps; i++)
            clipped += rec->steps[i].clip_coef < 1.0;
        fprintf(f,
                "Clipping: `clip_grad_norm_(max_norm=%g, norm_type=%g)` %s; total norm before "
                "clipping %.9g in step %lld and %.9g in step %lld; clip coefficient %.9g and %.9g; "
                "%d of %d steps clipped (coefficient below 1).\n\n",
                cfg->clip_grad_norm, cfg->norm_type,
                cfg->clip_before_unscale ? "**before** `scaler.unscale_()`, on the scaled "
                                           "gradients (their norm is the loss scale times the "
                                           "true one)"
                                         : "after `scaler.unscale_()`",
                rec->steps[0].total_norm, (long long)rec->steps[0].step,
                rec->steps[rec->n_steps - 1].total_norm, (long long)rec->steps[rec->n_steps - 1].step,
                rec->steps[0].clip_coef, rec->steps[rec->n_steps - 1].clip_coef, clipped,
                (int)rec->n_steps);
    }
    if (cfg->clip_grad_value > 0)
        fprintf(f, "Clipping: `clip_grad_value_(clip_value=%g)` %s.\n\n", cfg->clip_grad_value,
                cfg->clip_before_unscale ? "before `scaler.unscale_()`"
                                         : "after `scaler.unscale_()`");
}

static void put_steps(FILE *f, const case_report *cr)
{
    const run_record *rec = cr->rec;
    fputs("## Steps\n\n", f);
    if (rec->n_steps == 0) {
        fputs("No step completed (steps.csv has no rows).\n\n", f);
        return;
    }
    int64_t lost = 0;
    for (int64_t i = 0; i < rec->n_steps; i++)
        lost += rec->steps[i].lost_updates;
    const record_step *first = &rec->steps[0], *last = &rec->steps[rec->n_steps - 1];
    fprintf(f, "%lld step%s completed; loss %.9g in step %lld", (long long)rec->n_steps,
            rec->n_steps == 1 ? "" : "s", (double)first->loss, (long long)first->step);
    if (rec->n_steps > 1)
        fprintf(f, ", %.9g in step %lld", (double)last->loss, (long long)last->step);
    fprintf(f,
            "; median step time %.3f ms; lost updates (parameter elements a step meant to "
            "change and rounding left as they were): %lld in all.\n\n",
            cr->res->step_ms, (long long)lost);
    put_accumulation_and_clipping(f, cr);
    if (rec->n_steps > STEPS_TABLE_MAX) {
        fputs("Every step is in steps.csv.\n\n", f);
        return;
    }
    fputs("| step | loss | loss_scale | found_inf | skipped | lost_updates | first_nonfinite |\n"
          "|---:|---:|---:|---:|---:|---:|---|\n",
          f);
    for (int64_t i = 0; i < rec->n_steps; i++) {
        const record_step *s = &rec->steps[i];
        char scale[32] = "–";
        if (cr->cfg->scaler)
            float_text_g9(s->loss_scale, scale);
        fprintf(f, "| %lld | %.9g | %s | %d | %d | %lld | %s%s%s |\n", (long long)s->step,
                (double)s->loss, scale, s->found_inf, s->skipped,
                (long long)s->lost_updates, s->first_nonfinite[0] ? "`" : "", s->first_nonfinite,
                s->first_nonfinite[0] ? "`" : "");
    }
    fputs("\n", f);
}

static void put_tensor_table(FILE *f, const run_record *rec, int64_t step)
{
    fprintf(f,
            "## Tensors, step %lld\n\n| # | pass | tensor | role | dtype | shape | numel | "
            "underflow | subnormal | overflow | NaN | amax |\n"
            "|---:|---|---|---|---|---|---:|---:|---:|---:|---:|---:|\n",
            (long long)step);
    int k = 0;
    for (int64_t i = 0; i < rec->n_tensors; i++) {
        const record_tensor *r = &rec->tensors[i];
        if (r->step != step)
            continue;
        char under[64], sub[64], over[32], nan[32], amax[32] = "–";
        format_count_cell(r->counted, r->underflow, r->numel, under, sizeof under);
        format_count_cell(r->counted, r->subnormal, r->numel, sub, sizeof sub);
        snprintf(over, sizeof over, r->counted ? "%lld" : "–", (long long)r->overflow);
        snprintf(nan, sizeof nan, r->counted ? "%lld" : "–", (long long)r->nan);
        if (r->counted)
            float_text_g9(r->amax, amax);
        fprintf(f, "| %d | %s | `%s` | %s | %s | %s | %lld | %s | %s | %s | %s | %s |\n", ++k,
                pass_name(r->pass), r->name, tensor_role_name(r->role), dtype_name(r->dtype),
                r->shape, (long long)r->numel, under, sub, over, nan, amax);
    }
    fputs("\n", f);
}

static const char *mem_meaning(const char *category)
{
    static const struct {
        const char *name, *meaning;
    } m[] = {
        {"params", "the model's parameters, in their dtype"},
        {"grads", "parameters' `.grad`, gradients of autocast copies, activation gradients"},
        {"master_params", "float32 master copies kept by the optimizer"},
        {"optimizer_state", "momentum, Adam's exp_avg and exp_avg_sq, RMSprop's square_avg"},
        {"activations", "tensors the forward pass produced, kept for backward"},
        {"autocast_cache", "autocast's low-precision copies of the parameters"},
        {"inputs", "the input batch and the targets"},
        {"workspace", "backend scratch, not in the total (PyTorch would not hold it)"},
        {"total", "peak of the sum of the categories above workspace, at one moment"},
        {"saved_for_backward", "most bytes the autograd graph kept for backward at the end of a "
                               "forward pass, parameters and autocast copies left out (a measure, "
                               "not a category of the total)"},
    };
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (!strcmp(m[i].name, category))
            return m[i].meaning;
    return "";
}

static void put_memory(FILE *f, const run_record *rec)
{
    fputs("## Memory\n\nPeak bytes of each category (memory.csv); each category peaks at its "
          "own moment, so the total's peak is not the sum of theirs.\n\n"
          "| category | peak bytes | peak MiB | at the end, bytes | what |\n"
          "|---|---:|---:|---:|---|\n",
          f);
    for (int64_t i = 0; i < rec->n_memory; i++) {
        const record_memory *m = &rec->memory[i];
        bool total = !strcmp(m->category, "total");
        fprintf(f,
                total ? "| **%s** | **%lld** | **%.2f** | %lld | %s |\n"
                      : "| %s | %lld | %.2f | %lld | %s |\n",
                m->category, (long long)m->peak, mib_of(m->peak), (long long)m->end,
                mem_meaning(m->category));
    }
    fputs("\n", f);
    const record_memory *saved = NULL;
    for (int64_t i = 0; i < rec->n_memory && !saved; i++)
        if (!strcmp(rec->memory[i].category, "saved_for_backward"))
            saved = &rec->memory[i];
    int n = 0;
    for (int d = 0; saved && d < DTYPE_COUNT; d++) {
        int64_t b = saved->by_dtype[d];
        if (!b)
            continue;
        fprintf(f, "%s%s %lld bytes (%.2f MiB)",
                n++ ? ", "
                    : "Saved for backward by dtype (the storages of `saved_for_backward` "
                      "at its peak, from what the autograd graph's nodes keep): ",
                dtype_name((dtype)d), (long long)b, mib_of(b));
    }
    if (n)
        fputs(".\n\n", f);
}

static void put_plots(FILE *f, const case_report *cr)
{
    fputs("## Plots\n\nDrawn by `plot/plot.py` (`make plots`).\n\n", f);
    if (report_has_hist_plot(cr->rec))
        fputs("![log2|x| histogram of the gradients](hist_grads.png)\n\n", f);
    if (cr->rec->n_steps >= 2)
        fputs("![loss and loss scale over the steps](loss_scale.png)\n\n", f);
    fputs("![memory by category](memory.png)\n", f);
}

static int write_report_md(FILE *f, const void *ctx, char *err, int errlen)
{
    const case_report *cr = ctx;
    const run_record *rec = cr->rec;
    const case_result *res = cr->res;
    fputs("# ", f);
    put_md(f, cr->cfg->name);
    fputs("\n\n", f);
    if (cr->cfg->description[0]) {
        fputc('*', f);
        put_md(f, cr->cfg->description);
        fputs("*\n\n", f);
    }
    put_config_line(f, cr->cfg);
    fputs("**Result:** ", f);
    if (res->interrupted) /* "interrupted after step K of N (SIGINT)": its K steps below */
        put_md(f, res->error);
    else
        fputs(res->ok ? "ran" : "ended in an error", f);
    fprintf(f, " on %s; %d of %d expectations held.", res->device, res->expect_passed,
            res->expect_total);
    if (res->ok)
        fprintf(f, " Final loss %.9g.", res->final_loss);
    fputs(" Compared with the other cases and the baseline in [REPORT.md](../REPORT.md).\n\n", f);
    if (!res->passed && res->failures[0]) {
        fputs("```\n", f);
        fputs(res->failures, f);
        fputs("```\n\n", f);
    }
    put_rounding_note(f);
    if (!res->ok)
        put_error(f, cr);
    if (cr->step >= 0) {
        const record_tensor **buf = calloc(4 * (size_t)rec->n_tensors + 1, sizeof *buf);
        if (!buf)
            return report_fail(err, errlen, "out of memory writing report.md");
        fprintf(f, "## Answer (step %lld)\n\n", (long long)cr->step);
        put_param_grads(f, cr, buf);
        put_master(f, cr, buf);
        put_activation_grads(f, cr, buf);
        free(buf);
        char share[96];
        format_share(res->grad_underflow, res->grad_numel, share, sizeof share);
        fprintf(f,
                "**In all**, over the backward passes of the observed steps, %s gradient "
                "values underflowed to zero (summary.csv `grad_underflow` of `grad_numel`).",
                share);
        put_fp8_grad_copies(f, rec);
        fputs("\n\n", f);
        report_put_float32_reasons(f, rec, cr->step);
        put_nonfinite(f, cr);
    }
    if (report_put_fp8(f, rec, err, errlen))
        return -1;
    put_scaler(f, cr);
    put_first_nonfinite(f, cr);
    put_steps(f, cr);
    int64_t first = -1, last = -1;
    for (int64_t i = 0; i < rec->n_tensors; i++) {
        if (first < 0 || rec->tensors[i].step < first)
            first = rec->tensors[i].step;
        if (rec->tensors[i].step > last)
            last = rec->tensors[i].step;
    }
    if (first < 0)
        fputs("## Tensors\n\nNone: tensors.csv has no rows.\n\n", f);
    else
        put_tensor_table(f, rec, first);
    if (last > first)
        put_tensor_table(f, rec, last);
    put_memory(f, rec);
    put_plots(f, cr);
    report_put_allreduce(f, rec);
    return 0;
}

/* Fills the counts of the GradScaler paragraph (the histograms). */
static void count_scaled(case_report *cr)
{
    const run_record *rec = cr->rec;
    if (cr->step < 0 || !report_step_scale(rec, cr->step, &cr->log2_scale))
        return;
    for (int64_t i = 0; i < rec->n_tensors; i++) {
        const record_tensor *r = &rec->tensors[i];
        if (r->step == cr->step && row_is_backward_grad(r) && r->counted &&
            dtype_is_half(r->dtype)) {
            cr->half_grad_numel += r->numel;
            cr->half_grad_underflow += r->underflow;
        }
    }
    if (cr->half_grad_numel == 0)
        return;
    cr->scaled_count = true;
    cr->would_underflow = report_hist_below(rec, cr->step, -cr->log2_scale);
}

int report_case(const run_record *rec, const char *case_dir, char *err, int errlen)
{
    err[0] = '\0';
    case_report cr = {
        .cfg = &rec->config, .res = &rec->result, .rec = rec, .step = report_step_of(rec)};
    count_scaled(&cr);
    return write_atomically(case_dir, "report.md", write_report_md, &cr, err, errlen);
}
