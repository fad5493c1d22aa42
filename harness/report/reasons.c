/*
 * report/reasons.c: why each float32 activation of an autocast case is float32 (see
 * report/reasons.h), from the reason its row records: an autocast list names the op and
 * where autocast_mode.cpp registers it (KERNEL_CUDA(op, list)); an op on no list names the
 * operands whose dtypes gave the output's (their dtypes from the step's rows).
 */
#include "reasons.h"

#include <string.h>

#include "ops/tensor.h"
#include "rows.h"

/* the dtype of operand `name`: its forward row in the step, else any row of it; false when
 * the record has none */
static bool operand_dtype(const run_record *rec, int64_t step, const char *name, dtype *dt,
                          bool *param)
{
    const record_tensor *r = report_row(rec, step, PASS_FORWARD, name);
    for (int64_t i = 0; !r && i < rec->n_tensors; i++)
        if (!strcmp(rec->tensors[i].name, name))
            r = &rec->tensors[i];
    if (!r)
        return false;
    *dt = r->dtype;
    *param = r->role == ROLE_PARAM;
    return true;
}

#define MAX_OPERANDS 4

/* the operands of a row's dtype_from, "a|b", into names (at most MAX_OPERANDS); how many */
static int operands_of(const record_tensor *r, char names[MAX_OPERANDS][TENSOR_NAME_MAX])
{
    int n = 0;
    for (const char *p = r->from; *p && n < MAX_OPERANDS;) {
        size_t len = strcspn(p, "|");
        snprintf(names[n++], TENSOR_NAME_MAX, "%.*s", (int)len, p);
        p += len + (p[len] == '|');
    }
    return n;
}

/* "`a`", "`a` and `b`", "`a`, `b` and `c`", each with " (dtype)" when with_dtypes */
static void put_operands(FILE *f, char names[MAX_OPERANDS][TENSOR_NAME_MAX], const bool *known,
                         const dtype *dts, int n, bool with_dtypes)
{
    for (int j = 0; j < n; j++) {
        fprintf(f, "%s`%s`", j == 0 ? "" : j + 1 < n ? ", " : " and ", names[j]);
        if (with_dtypes && known[j])
            fprintf(f, " (%s)", dtype_name(dts[j]));
    }
}

/* an op on no autocast list: its operands' dtype, or type promotion of theirs */
static void put_operands_reason(FILE *f, const run_record *rec, const record_tensor *r)
{
    char names[MAX_OPERANDS][TENSOR_NAME_MAX];
    dtype dts[MAX_OPERANDS];
    bool known[MAX_OPERANDS], param = false;
    int n = operands_of(r, names);
    for (int j = 0; j < n; j++)
        known[j] = operand_dtype(rec, r->step, names[j], &dts[j], &param);
    fprintf(f, "`%s` is float32: %s is on no autocast list", r->name, r->op);
    if (n == 0) {
        fputs(" and runs in its input's dtype", f);
    } else if (r->reason == DTYPE_REASON_PROMOTE) {
        fputs("; type promotion of ", f);
        put_operands(f, names, known, dts, n, true);
        fputs(" is float32", f);
    } else {
        fprintf(f, " and its %s ", n > 1 ? "inputs" : param ? "weight" : "input");
        put_operands(f, names, known, dts, n, false);
        fputs(n > 1 ? " are float32" : " is float32", f);
    }
}

/* one row's reason, as its record says it */
static void put_reason(FILE *f, const run_record *rec, const record_tensor *r)
{
    const char *list = dtype_reason_name(r->reason);
    switch (r->reason) {
    case DTYPE_REASON_FP32:
    case DTYPE_REASON_FP32_SET_OPT_DTYPE:
    case DTYPE_REASON_FP32_APPEND_DTYPE:
        fprintf(f, "`%s` is float32 because %s runs in float32 under autocast (%s: "
                   "KERNEL_CUDA(%s, %s))",
                r->name, r->op, list, r->op, list);
        return;
    case DTYPE_REASON_INPUT:
    case DTYPE_REASON_PROMOTE:
        put_operands_reason(f, rec, r);
        return;
    case DTYPE_REASON_AUTOCAST_OFF:
        fprintf(f, "`%s` is float32: %s ran with autocast disabled (the loss computed outside "
                   "the autocast region, or a layer with autocast=no), in its input's dtype, "
                   "float32",
                r->name, r->op);
        return;
    case DTYPE_REASON_OPMATH:
        fprintf(f, "`%s` is float32: %s computes it inside the op in float32, its accumulate "
                   "type (opmath), whatever its inputs' dtype",
                r->name, r->op);
        return;
    case DTYPE_REASON_CAST:
        fprintf(f, "`%s` is float32: an explicit cast (`%s`) of `%s`", r->name, r->op, r->from);
        return;
    case DTYPE_REASON_LOWER_PRECISION_FP: /* float32 only where autocast's dtype were */
    case DTYPE_REASON_DATA:
    case DTYPE_REASON_PARAM:
    case DTYPE_REASON_GRAD:
    case DTYPE_REASON_FP8:
    case DTYPE_REASON_INDEX:
        fprintf(f, "`%s` is float32 (tensors.csv's dtype_reason: %s)", r->name, list);
        return;
    case DTYPE_REASON_UNSET:
    case DTYPE_REASON_COUNT:
        break;
    }
    fprintf(f, "`%s` is float32 (tensors.csv records no reason)", r->name);
}

void report_put_float32_reasons(FILE *f, const run_record *rec, int64_t step)
{
    if (!rec->config.autocast)
        return;
    int n = 0;
    for (int64_t i = 0; i < rec->n_tensors; i++) {
        const record_tensor *r = &rec->tensors[i];
        if (r->step != step || r->pass != PASS_FORWARD || r->role != ROLE_ACTIVATION ||
            r->dtype != DTYPE_FLOAT32)
            continue;
        fputs(n++ ? ". " : "**Why float32 under autocast:** ", f);
        put_reason(f, rec, r);
    }
    if (n)
        fputs(".\n\n", f);
}
