/*
 * report/fp8.c: the float8 section of report.md and its line in REPORT.md, from the
 * record's float8 and tensor rows (see report/fp8.h). Numbers are the rows' values as fp8.csv
 * prints them (amax, scale: %.9g) or computed from the integer counts, and the two ratios
 * the sentences give (largest / scale, amax against it) are printed with %.4g.
 */
#include "fp8.h"

#include <stdlib.h>
#include <string.h>

#include "core/format.h"
#include "text.h"

/* fp8.csv's tensor is the layer's name and one of these (FP8-SPEC.md) */
static const char *const operand_suffix[FP8_OPERAND_OTHER] = {
    [FP8_OPERAND_INPUT] = ".input",
    [FP8_OPERAND_WEIGHT] = ".weight",
    [FP8_OPERAND_OUT_GRAD] = ".out.grad",
};

/* MXFP8's column-wise copy of an operand: fp8.csv's "L.input.colwise" (fp8_linear.h) */
static const char colwise_suffix[] = ".colwise";

/* the length of the operand's name without colwise_suffix, and whether it had it */
static size_t operand_name_len(const char *tensor, bool *colwise)
{
    size_t n = strlen(tensor), m = sizeof colwise_suffix - 1;
    *colwise = n > m && !strcmp(tensor + n - m, colwise_suffix);
    return *colwise ? n - m : n;
}

/* the operand's kind and its layer's name length (the whole name for another kind), the
 * column-wise copy's as its operand's */
static fp8_operand_kind operand_kind(const char *tensor, size_t *layer_len)
{
    bool colwise;
    size_t n = operand_name_len(tensor, &colwise);
    for (int k = 0; k < FP8_OPERAND_OTHER; k++) {
        size_t m = strlen(operand_suffix[k]);
        if (n > m && !strncmp(tensor + n - m, operand_suffix[k], m)) {
            *layer_len = n - m;
            return (fp8_operand_kind)k;
        }
    }
    *layer_len = n;
    return FP8_OPERAND_OTHER;
}

static int cmp_operand(const void *a, const void *b)
{
    const fp8_operand *x = a, *y = b;
    if (x->layer_rank != y->layer_rank)
        return x->layer_rank - y->layer_rank;
    if (x->kind != y->kind)
        return x->kind - y->kind;
    if (x->colwise != y->colwise)
        return x->colwise - y->colwise;
    return strcmp(x->tensor, y->tensor);
}

/* "%.9g" of a float, as the CSV files print it */
static const char *g9(float v, char buf[32])
{
    float_text_g9(v, buf);
    return buf;
}

/* The operand of (tensor, format), added when new; layer_rank: the first appearance of its
 * layer among the operands so far. */
static fp8_operand *operand_of(fp8_summary *s, const char *tensor, dtype format)
{
    for (int i = 0; i < s->n_ops; i++)
        if (!strcmp(s->ops[i].tensor, tensor) && s->ops[i].format == format)
            return &s->ops[i];
    size_t len, other_len;
    fp8_operand_kind kind = operand_kind(tensor, &len);
    int rank = s->n_ops;
    for (int i = 0; i < s->n_ops && rank == s->n_ops; i++) {
        operand_kind(s->ops[i].tensor, &other_len);
        if (other_len == len && !strncmp(s->ops[i].tensor, tensor, len))
            rank = s->ops[i].layer_rank;
    }
    fp8_operand *op = &s->ops[s->n_ops++];
    *op = (fp8_operand){
        .tensor = tensor, .format = format, .layer_rank = rank, .kind = kind, .worst_step = -1};
    op->name_len = (int)operand_name_len(tensor, &op->colwise);
    return op;
}

/* tensors.csv's counted rows of the operand's quantized copy, "<operand>@<format>" (and
 * ".colwise" after it for a column-wise copy), and a weight's gradient row
 * "<operand>.grad@<dtype>" (on the row-wise copy's operand only, so it is told once) */
static void add_copy_rows(fp8_summary *s, fp8_operand *op, const run_record *rec)
{
    const char *format = dtype_name(op->format);
    size_t n = (size_t)op->name_len, m = strlen(format);
    const char *tail = op->colwise ? colwise_suffix : "";
    for (int64_t i = 0; i < rec->n_tensors; i++) {
        const record_tensor *r = &rec->tensors[i];
        if (op->kind == FP8_OPERAND_WEIGHT && !op->colwise && !strncmp(r->name, op->tensor, n) &&
            !strncmp(r->name + n, ".grad@", 6)) {
            op->wgrad_name = r->name;
            op->wgrad_dtype = r->dtype;
        }
        if (!r->counted || strncmp(r->name, op->tensor, n) || r->name[n] != '@' ||
            strncmp(r->name + n + 1, format, m) || strcmp(r->name + n + 1 + m, tail))
            continue;
        op->numel = r->numel;
        op->subnormal += r->subnormal;
        op->observed++;
        if (r->step == s->last_step) {
            op->last_subnormal += r->subnormal;
            op->last_counted = true;
            s->last_subnormal += r->subnormal;
        }
    }
}

/* one row into its operand's sums (the last step's once it is known) */
static void add_row(fp8_summary *s, const record_fp8 *x)
{
    fp8_operand *op = operand_of(s, x->tensor, x->format);
    op->n_rows++;
    op->saturated += x->saturated;
    op->underflow += x->underflow;
    if (op->n_rows == 1 || x->scale < op->scale_lo)
        op->scale_lo = x->scale;
    if (op->n_rows == 1 || x->scale > op->scale_hi)
        op->scale_hi = x->scale;
    if (x->underflow > op->under_most) {
        op->under_most = x->underflow;
        op->under_step = x->step;
        op->under_scale = x->scale;
    }
    if (x->saturated > op->worst_saturated) {
        op->worst_saturated = x->saturated;
        op->worst_step = x->step;
        op->worst_amax = x->amax;
        op->worst_scale = x->scale;
    }
    s->saturated += x->saturated;
    s->underflow += x->underflow;
}

static int summarize(fp8_summary *s, const run_record *rec, char *err, int errlen)
{
    s->ops = calloc((size_t)rec->n_fp8 + 1, sizeof *s->ops);
    if (!s->ops)
        return report_fail(err, errlen, "out of memory summarizing the float8 rows");
    s->first_step = s->last_step = -1;
    for (int64_t r = 0; r < rec->n_fp8; r++) {
        int64_t step = rec->fp8[r].step;
        bool seen = false;
        for (int64_t i = 0; i < r && !seen; i++)
            seen = rec->fp8[i].step == step;
        s->n_steps += !seen;
        if (s->first_step < 0 || step < s->first_step)
            s->first_step = step;
        if (step > s->last_step)
            s->last_step = step;
    }
    for (int64_t r = 0; r < rec->n_fp8; r++) {
        add_row(s, &rec->fp8[r]);
        if (rec->fp8[r].step == s->last_step) {
            fp8_operand *op = operand_of(s, rec->fp8[r].tensor, rec->fp8[r].format);
            op->last_saturated += rec->fp8[r].saturated;
            op->last_underflow += rec->fp8[r].underflow;
        }
    }
    for (int i = 0; i < s->n_ops; i++) {
        add_copy_rows(s, &s->ops[i], rec);
        s->n_colwise += s->ops[i].colwise;
    }
    /* without the case's config: column-wise copies are MXFP8's alone (fp8_linear.h) */
    if (s->n_colwise > 0) {
        s->recipe = FP8_REPORT_MXFP8;
        s->recipe_inferred = true;
    }
    qsort(s->ops, (size_t)s->n_ops, sizeof *s->ops, cmp_operand);
    /* the operands that saturated, most first (an insertion sort: a few dozen at most) */
    s->by_saturated = calloc((size_t)s->n_ops + 1, sizeof *s->by_saturated);
    if (!s->by_saturated)
        return report_fail(err, errlen, "out of memory summarizing the float8 rows");
    for (int i = 0; i < s->n_ops; i++) {
        if (s->ops[i].worst_saturated == 0)
            continue;
        int j = s->n_saturated++;
        for (; j > 0 && s->by_saturated[j - 1]->worst_saturated < s->ops[i].worst_saturated; j--)
            s->by_saturated[j] = s->by_saturated[j - 1];
        s->by_saturated[j] = &s->ops[i];
    }
    return 0;
}

int fp8_summary_of(fp8_summary *s, const run_record *rec, char *err, int errlen)
{
    memset(s, 0, sizeof *s);
    if (!rec->has_fp8)
        return 1;
    if (summarize(s, rec, err, errlen)) {
        fp8_summary_free(s);
        return -1;
    }
    return 0;
}

void fp8_summary_free(fp8_summary *s)
{
    free(s->ops);
    free(s->by_saturated);
    memset(s, 0, sizeof *s);
}

/* "`fc1.input`", or "`fc1.input` (column-wise)" for MXFP8's column-wise copy */
static void put_name(FILE *f, const fp8_operand *op)
{
    fprintf(f, "`%.*s`%s", op->name_len, op->tensor, op->colwise ? " (column-wise)" : "");
}

/* "`fc1.input` (float8_e4m3fn)", or "`fc1.input` (column-wise, float8_e4m3fn)" */
static void put_name_format(FILE *f, const fp8_operand *op)
{
    fprintf(f, "`%.*s` (%s%s)", op->name_len, op->tensor, op->colwise ? "column-wise, " : "",
            dtype_name(op->format));
}

/* a count with its percentage of numel x rows when numel is known */
static void count_cell(int64_t count, int64_t numel, int rows, char *buf, size_t len)
{
    if (numel > 0)
        format_count_cell(true, count, numel * rows, buf, len);
    else
        snprintf(buf, len, "%lld", (long long)count);
}

/* " (12.34% of its values)" when numel is known */
static void put_share_of(FILE *f, int64_t count, int64_t numel, int rows)
{
    if (numel <= 0)
        return;
    char pct[32];
    format_pct(count, numel * rows, pct, sizeof pct);
    fprintf(f, " (%s of the values quantized)", pct);
}

static void put_table(FILE *f, const fp8_summary *s)
{
    fprintf(f,
            "| operand | format | steps | saturated | saturated, step %lld | underflow | "
            "underflow, step %lld | subnormal (observed steps) | subnormal, step %lld | scale, "
            "smallest to largest |\n"
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n",
            (long long)s->last_step, (long long)s->last_step, (long long)s->last_step);
    for (int i = 0; i < s->n_ops; i++) {
        const fp8_operand *op = &s->ops[i];
        char sat[64], last_sat[64], under[64], last_under[64], sub[64], last_sub[64];
        count_cell(op->saturated, op->numel, op->n_rows, sat, sizeof sat);
        count_cell(op->last_saturated, op->numel, 1, last_sat, sizeof last_sat);
        count_cell(op->underflow, op->numel, op->n_rows, under, sizeof under);
        count_cell(op->last_underflow, op->numel, 1, last_under, sizeof last_under);
        format_count_cell(op->observed > 0, op->subnormal, op->numel * op->observed, sub,
                          sizeof sub);
        format_count_cell(op->last_counted, op->last_subnormal, op->numel, last_sub,
                          sizeof last_sub);
        char lo[32], hi[32];
        fputs("| ", f);
        put_name(f, op);
        fprintf(f, " | %s | %d | %s | %s | %s | %s | %s | %s | %s to %s |\n",
                dtype_name(op->format), op->n_rows, sat, last_sat, under, last_under, sub, last_sub,
                g9(op->scale_lo, lo), g9(op->scale_hi, hi));
    }
    fputs("\n", f);
}

#define SATURATED_LISTED 8 /* operands named after the one that saturated most */

/* Why the row with an operand's most saturated values saturated, from its amax and scale:
 * the scale was made for a smaller amax than the step's own (delayed scaling's history), or
 * for this amax, whose product with the scale rounded above the largest value (a scale
 * largest / amax rounded to float32: current scaling, or delayed scaling with an unchanged
 * amax). 2^-20 covers that rounding and fp8.csv's nine digits. */
typedef enum saturation_cause {
    SATURATION_UNKNOWN, /* no format or no positive scale, or an amax below the fitted one */
    SATURATION_GREW,    /* amax > largest / scale */
    SATURATION_ROUNDED, /* amax * scale = largest, up to rounding */
} saturation_cause;

#define SATURATION_TOLERANCE 0x1p-20

typedef struct saturation {
    saturation_cause cause;
    double fits, amax, largest; /* fits: largest / scale, the amax the scale maps to largest */
} saturation;

static saturation saturation_of(const fp8_summary *s, const fp8_operand *op)
{
    const format_info *fmt = format_of(op->format);
    double scale = (double)op->worst_scale;
    saturation x = {.cause = SATURATION_UNKNOWN};
    /* MXFP8: the scale is one block's, not the scale of every value (fp8_linear.h) */
    if (!fmt || !(scale > 0) || s->recipe >= FP8_REPORT_MXFP8)
        return x;
    x.largest = fmt->largest;
    x.fits = fmt->largest / scale;
    x.amax = (double)op->worst_amax;
    if (x.amax > x.fits * (1 + SATURATION_TOLERANCE))
        x.cause = SATURATION_GREW;
    else if (x.amax >= x.fits * (1 - SATURATION_TOLERANCE))
        x.cause = SATURATION_ROUNDED;
    return x;
}

/* The operand that saturated most, in its worst step, with the reason; then the others. */
static void put_saturated(FILE *f, const fp8_summary *s)
{
    const fp8_operand *const *by = s->by_saturated;
    int n = s->n_saturated;
    if (n == 0) {
        fputs(" No value saturated in any step.", f);
        return;
    }
    const fp8_operand *op = by[0];
    fprintf(f, " %lld value%s saturated over the steps. Most in ", (long long)s->saturated,
            s->saturated == 1 ? "" : "s");
    put_name_format(f, op);
    fprintf(f, ": in step %lld, %lld", (long long)op->worst_step, (long long)op->worst_saturated);
    if (op->numel > 0) {
        char pct[32];
        format_pct(op->worst_saturated, op->numel, pct, sizeof pct);
        fprintf(f, " of its %lld values (%s)", (long long)op->numel, pct);
    }
    const char *were = op->worst_saturated == 1 ? "was" : "were";
    char worst_scale[32], worst_amax[32];
    g9(op->worst_scale, worst_scale);
    g9(op->worst_amax, worst_amax);
    saturation x = saturation_of(s, op);
    switch (x.cause) {
    case SATURATION_GREW:
        fprintf(f,
                " %s clamped to ±%g: its scale, %s, maps an amax of %.4g to %g (%g / scale), "
                "and the tensor's own amax in that step was %s, %.4g× that, so every value "
                "above %.4g saturated. The scale was not made from the step's own amax: delayed "
                "scaling computes it from the amax history of the steps before (`scale = "
                "largest / amax / 2^margin`), so a tensor whose amax grows between steps "
                "saturates; current scaling would map this step's amax to the largest value "
                "itself.",
                were, x.largest, worst_scale, x.fits, x.largest, x.largest, worst_amax,
                x.amax / x.fits, x.fits);
        break;
    case SATURATION_ROUNDED:
        fprintf(f,
                " %s clamped to ±%g: its scale, %s, is %g / the step's own amax, %s, rounded "
                "to float32, and the amax times the scale rounded just above %g; rounding to "
                "nearest gives %g for those values as well, so the clamp changed nothing.",
                were, x.largest, worst_scale, x.largest, worst_amax, x.largest, x.largest);
        break;
    case SATURATION_UNKNOWN:
        fprintf(f, " %s clamped to the format's largest finite value.", were);
        break;
    }
    for (int i = 1; i < n && i <= SATURATED_LISTED; i++) {
        fputs(i == 1 ? " Also " : ", ", f);
        put_name(f, by[i]);
        fprintf(f, " %lld in step %lld", (long long)by[i]->worst_saturated,
                (long long)by[i]->worst_step);
        x = saturation_of(s, by[i]);
        switch (x.cause) {
        case SATURATION_GREW:
            fprintf(f, " (amax %.4g× the one its scale maps to %g)", x.amax / x.fits, x.largest);
            break;
        case SATURATION_ROUNDED:
            fprintf(f, " (its own amax times its scale rounded just above %g)", x.largest);
            break;
        case SATURATION_UNKNOWN:
            break;
        }
    }
    if (n > SATURATED_LISTED + 1)
        fprintf(f, " and %d more operands (the table)", n - SATURATED_LISTED - 1);
    if (n > 1)
        fputs(", each in the step in which most of its values did.", f);
}

/* The sentence on the operand with the most underflow. */
static void put_underflow(FILE *f, const fp8_summary *s)
{
    const fp8_operand *most = NULL;
    for (int i = 0; i < s->n_ops; i++)
        if (s->ops[i].underflow > 0 && (!most || s->ops[i].underflow > most->underflow))
            most = &s->ops[i];
    if (!most) {
        fputs(" No non-zero value underflowed to zero in any step.", f);
        return;
    }
    const format_info *fmt = format_of(most->format);
    bool mx = s->recipe >= FP8_REPORT_MXFP8; /* block scales */
    char under_scale[32];
    g9(most->under_scale, under_scale);
    fprintf(f, " %lld value%s underflowed to zero over the steps; most in ",
            (long long)s->underflow, s->underflow == 1 ? "" : "s");
    put_name_format(f, most);
    fprintf(f, ": %lld", (long long)most->underflow);
    put_share_of(f, most->underflow, most->numel, most->n_rows);
    fprintf(f, ", of which %lld in step %lld with scale %s", (long long)most->under_most,
            (long long)most->under_step, under_scale);
    if (mx)
        fputs(" (the block holding the amax; every other block's multiplier is that or larger)", f);
    /* only delayed scaling starts from a scale no amax chose */
    if (most->under_step == s->first_step && most->under_scale == 1.0f &&
        (s->recipe == FP8_REPORT_PER_TENSOR || s->recipe == FP8_REPORT_DELAYED))
        fputs(" (the initial scale: no amax was recorded before the first step)", f);
    if (fmt)
        fprintf(f,
                ": multiplied by %s scale they lay at or below half %s's smallest subnormal, "
                "2^%d, and rounded to zero",
                mx ? "their block's" : "the", dtype_name(most->format), fmt->zero_exp);
    fprintf(f, "; %lld in step %lld.", (long long)most->last_underflow, (long long)s->last_step);
}

/* The sentence on the dtype of the fp8 layers' weight gradients. */
static void put_wgrad(FILE *f, const fp8_summary *s)
{
    int n = 0;
    for (int i = 0; i < s->n_ops; i++)
        n += s->ops[i].wgrad_name != NULL;
    for (int i = 0, k = 0; i < s->n_ops; i++) {
        const fp8_operand *op = &s->ops[i];
        if (!op->wgrad_name)
            continue;
        if (k == 0)
            fprintf(f,
                    " The weight gradients of the float8 layers came out of the wgrad GEMM "
                    "(the quantized output gradient times the quantized input, summed in "
                    "float32) in %s, as",
                    dtype_name(op->wgrad_dtype));
        fprintf(f, "%s `%s`", k == 0 ? "" : k + 1 < n ? "," : " and", op->wgrad_name);
        k++;
    }
    if (n)
        fputs(", and were cast into the parameters' `.grad`.", f);
}

/* The sentence on the subnormals of the last step, per format. */
static void put_subnormal(FILE *f, const fp8_summary *s)
{
    bool any_counted = false;
    for (int i = 0; i < s->n_ops; i++)
        any_counted |= s->ops[i].last_counted;
    if (!any_counted) {
        fprintf(f,
                " tensors.csv has no counted row of the quantized copies in step %lld, so "
                "their subnormals are not known there.",
                (long long)s->last_step);
        return;
    }
    fprintf(f, " In step %lld, %lld value%s of the quantized copies %s subnormal",
            (long long)s->last_step, (long long)s->last_subnormal,
            s->last_subnormal == 1 ? "" : "s", s->last_subnormal == 1 ? "was" : "were");
    /* the formats present, each once, with its smallest normal */
    dtype told[8];
    int n_told = 0;
    for (int i = 0; i < s->n_ops; i++) {
        const format_info *fmt = format_of(s->ops[i].format);
        bool seen = false;
        for (int j = 0; j < n_told && !seen; j++)
            seen = told[j] == s->ops[i].format;
        if (seen || !fmt || n_told == (int)(sizeof told / sizeof *told))
            continue;
        fprintf(f, "%s2^%d in %s", n_told ? ", " : " (non-zero and, after scaling, below ",
                fmt->min_normal_exp, dtype_name(s->ops[i].format));
        told[n_told++] = s->ops[i].format;
    }
    fputs(n_told ? "; fewer significant bits)." : ".", f);
}

bool fp8_summary_has_hist(const fp8_summary *s)
{
    for (int i = 0; i < s->n_ops; i++)
        if (s->ops[i].observed > 0)
            return true;
    return false;
}

/* The sentences on what the scale column is and how the GEMM undoes it, per recipe. */
static void put_scales(FILE *f, const fp8_summary *s)
{
    static const char per_tensor[] = " The scale multiplies the values before the cast; the "
                                     "GEMM's output is multiplied by the two operands' "
                                     "`1 / scale`.";
    switch (s->recipe) {
    case FP8_REPORT_PER_TENSOR:
        fputs(per_tensor, f);
        return;
    case FP8_REPORT_DELAYED:
        fprintf(f,
                " Recipe: delayed scaling (each scale from its tensor's amax history of the "
                "steps before).%s",
                per_tensor);
        return;
    case FP8_REPORT_CURRENT:
        fprintf(f, " Recipe: current scaling (each scale from the quantized tensor's own amax).%s",
                per_tensor);
        return;
    case FP8_REPORT_MXFP8:
        fprintf(f,
                " Recipe: MXFP8 block scaling (CPU only)%s. Each operand has a row-wise copy, "
                "and %d of them also a column-wise copy that a gradient GEMM reads, quantized "
                "on its own blocks (the rows \"(column-wise)\", tensors.csv's "
                "`L.<operand>@<format>.colwise`). Every 32 consecutive values along the "
                "reduction dim of the GEMM that reads the copy share one E8M0 scale, a power "
                "of two (Transformer Engine's `float_to_e8m0` rounds the block's amax / the "
                "format's largest up); the scale column is the multiplier of the block that "
                "holds the tensor's amax, the smallest of its blocks' multipliers. The GEMM "
                "takes each float8 value times its block's `1 / scale` and sums the products in "
                "float32.",
                s->recipe_inferred ? ", inferred from fp8.csv's column-wise copies" : "",
                s->n_colwise);
        return;
    case FP8_REPORT_NVFP4:
        fprintf(f,
                " Recipe: NVFP4 block scaling (CPU only; Transformer Engine's NVFP4BlockScaling, "
                "docs/FP4.md). Every operand is float4_e2m1fn; 16 consecutive values along the "
                "reduction dim (16x16 tiles of the weight) share one E4M3 scale, under a "
                "float32 per-tensor scale S_enc = 448 * 6 / amax (the scale column); the "
                "column-wise copies of the input and the output gradient (%d copies) pass "
                "through TE's random Hadamard transform first, and the gradients round "
                "stochastically. A block whose E4M3 scale underflows reads as zeros.",
                s->n_colwise);
        return;
    case FP8_REPORT_MXFP4:
        fprintf(f,
                " Recipe: MXFP4 (CPU only; the OCP MX rule, torchao's FLOOR, docs/FP4.md). "
                "Every operand is float4_e2m1fn; 32 consecutive values along the reduction "
                "dim share one E8M0 scale 2^(floor(log2 amax) - 2), which leaves the block's "
                "amax between 4 and 8 times it: values from 6 times it up saturate. The scale "
                "column is the multiplier of the block that holds the tensor's amax.");
        return;
    }
}

void fp8_summary_put(FILE *f, const fp8_summary *s)
{
    int layers = 0;
    for (int i = 0; i < s->n_ops; i++)
        layers += i == 0 || s->ops[i].layer_rank != s->ops[i - 1].layer_rank;
    int operands = s->n_ops - s->n_colwise;
    fputs("## Float8\n\n", f);
    fprintf(f,
            "%d GEMM operand%s of %d layer%s ran in %s as Transformer Engine's `te.Linear` "
            "under `fp8_autocast` does (fp8.csv: one row per quantization, %d step%s from "
            "step %lld to %lld). Saturated: values the saturating cast clamped to ± the "
            "format's largest finite value; underflow: non-zero values that became zero "
            "(fp8.csv); subnormal: values of the quantized copy `L.<operand>@<format>` below "
            "the smallest normal (tensors.csv, the observed steps). Percentages are of the "
            "values quantized in the rows counted.",
            operands, operands == 1 ? "" : "s", layers, layers == 1 ? "" : "s",
            s->recipe >= FP8_REPORT_NVFP4 ? "float4_e2m1fn" : "float8", s->n_steps,
            s->n_steps == 1 ? "" : "s", (long long)s->first_step, (long long)s->last_step);
    put_scales(f, s);
    fputs("\n\n", f);
    put_table(f, s);
    fputs("**In words:**", f);
    put_saturated(f, s);
    put_underflow(f, s);
    put_subnormal(f, s);
    put_wgrad(f, s);
    fputs("\n\n", f);
    if (fp8_summary_has_hist(s))
        fputs("![log2|x| of each quantized tensor after scaling, against float8_e4m3fn's and "
              "float8_e5m2's ranges](fp8_hist.png)\n\n",
              f);
    fputs("![each quantized tensor's scale and amax over the steps](fp8_scale.png)\n\n", f);
}

void fp8_summary_line(const fp8_summary *s, char *buf, size_t len)
{
    const fp8_operand *sat = NULL, *under = NULL;
    for (int i = 0; i < s->n_ops; i++) {
        if (s->ops[i].saturated > 0 && (!sat || s->ops[i].saturated > sat->saturated))
            sat = &s->ops[i];
        if (s->ops[i].underflow > 0 && (!under || s->ops[i].underflow > under->underflow))
            under = &s->ops[i];
    }
    int operands = s->n_ops - s->n_colwise;
    int n = snprintf(buf, len, "Float8 (fp8.csv): %d GEMM operand%s", operands,
                     operands == 1 ? "" : "s");
    if (s->n_colwise > 0 && n >= 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, " (%d of them with a column-wise copy, MXFP8)",
                      s->n_colwise);
    if (n >= 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, " over %d step%s; %lld values saturated",
                      s->n_steps, s->n_steps == 1 ? "" : "s", (long long)s->saturated);
    if (sat && n >= 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, " (most in `%.*s`%s)", sat->name_len, sat->tensor,
                      sat->colwise ? " (column-wise)" : "");
    if (n >= 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, ", %lld underflowed", (long long)s->underflow);
    if (under && n >= 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, " (most in `%.*s`%s)", under->name_len,
                      under->tensor, under->colwise ? " (column-wise)" : "");
    if (n >= 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, ".");
}

/* the recipe [fp8] names */
static fp8_report_recipe recipe_of(const record_config *cfg)
{
    switch ((fp8_recipe_kind)cfg->fp8_recipe) {
    case FP8_RECIPE_DELAYED:
        return FP8_REPORT_DELAYED;
    case FP8_RECIPE_CURRENT:
        return FP8_REPORT_CURRENT;
    case FP8_RECIPE_MXFP8:
        return FP8_REPORT_MXFP8;
    case FP8_RECIPE_NVFP4:
        return FP8_REPORT_NVFP4;
    case FP8_RECIPE_MXFP4:
        return FP8_REPORT_MXFP4;
    }
    return FP8_REPORT_PER_TENSOR; /* not an fp8_recipe_kind: the section says no recipe */
}

int report_put_fp8(FILE *f, const run_record *rec, char *err, int errlen)
{
    fp8_summary s;
    int rc = fp8_summary_of(&s, rec, err, errlen);
    if (rc)
        return rc < 0 ? -1 : 0;
    if (rec->config.fp8) {
        s.recipe = recipe_of(&rec->config);
        s.recipe_inferred = false;
    }
    fp8_summary_put(f, &s);
    fp8_summary_free(&s);
    return 0;
}
