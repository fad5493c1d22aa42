/*
 * ops.c: `ampscope ops [--json]` (ops.h): the op table gathered from the layers' and losses'
 * definitions and the harness's own ops.
 */
#include "ops.h"

#include <stdbool.h>
#include <string.h>

#include "core/json.h"
#include "layers/layer.h"

/* one op of the listing */
typedef struct op_entry {
    const char *kind;      /* "pointwise", "reduction", "layer", "loss" */
    const char *owner_key; /* "layer" or "loss" for a kind's entry, else NULL */
    const char *owner;     /* that kind's name */
    const autocast_op *ac;
    const pw_row *row;     /* a pointwise row's */
    const rd_row *reduces; /* a reduction row's */
} op_entry;

/* Calls visit on every op: the pointwise rows (with their kinds' autocast entries), the
 * reduction rows, then the other layers' entries in kind order, then the losses'. */
static void each_op(void (*visit)(const op_entry *e, void *ctx), void *ctx)
{
    for (int op = 0; op < PW_OP_COUNT; op++)
        visit(&(op_entry){"pointwise", NULL, NULL, layer_def_of(LAYER_POINTWISE + op)->autocast,
                          &pw_rows[op], NULL},
              ctx);
    for (int op = 0; op < RD_OP_COUNT; op++) {
        const rd_row *row = &rd_rows[op];
        autocast_op ac = {row->name, row->policy, autocast_policy_list(row->policy), {NULL}};
        for (int i = 0; i < RD_MAX_ATEN && i < AUTOCAST_MAX_ATEN; i++)
            ac.aten[i] = row->aten[i];
        visit(&(op_entry){"reduction", NULL, NULL, &ac, NULL, row}, ctx);
    }
    for (int k = 0; k < LAYER_POINTWISE; k++) {
        const layer_def *d = layer_def_of((layer_kind)k);
        for (int i = 0; i < d->n_autocast; i++)
            visit(&(op_entry){"layer", "layer", d->name, &d->autocast[i], NULL, NULL}, ctx);
    }
    for (int k = 0; k < LOSS_KIND_COUNT; k++) {
        const loss_def *d = loss_def_of((loss_kind)k);
        for (int i = 0; i < d->n_autocast; i++)
            visit(&(op_entry){"loss", "loss", d->name, &d->autocast[i], NULL, NULL}, ctx);
    }
}

/* what an op runs in under autocast, in the table's words */
static const char *runs_in(autocast_policy p)
{
    switch (p) {
    case AUTOCAST_LOWER_PRECISION_FP:
        return "autocast dtype";
    case AUTOCAST_FP32:
    case AUTOCAST_FP32_SET_OPT_DTYPE:
    case AUTOCAST_FP32_APPEND_DTYPE:
        return "float32";
    case AUTOCAST_PROMOTE:
        return "widest input";
    case AUTOCAST_BANNED:
        return "refused";
    case AUTOCAST_NONE:
        return "input dtype";
    case AUTOCAST_UNSET:
    case AUTOCAST_POLICY_COUNT:
        break;
    }
    return "?"; /* the start-up checks refuse an entry without a policy */
}

/* the policy's word (every entry has one: the start-up checks refuse an entry without) */
static const char *policy_word(autocast_policy p)
{
    const char *w = autocast_policy_name(p);
    return w ? w : "unset";
}

typedef struct table_ctx {
    FILE *f;
    int width;
} table_ctx;

static void widest(const op_entry *e, void *p)
{
    table_ctx *c = p;
    int n = (int)strlen(e->ac->op);
    if (n > c->width)
        c->width = n;
}

static void table_row(const op_entry *e, void *p)
{
    const table_ctx *c = p;
    fprintf(c->f, "%-*s %-18s %-15s %s\n", c->width, e->ac->op, autocast_policy_name(e->ac->policy),
            runs_in(e->ac->policy), e->ac->pytorch_list);
}

void ops_print_table(FILE *f)
{
    table_ctx c = {f, 12};
    each_op(widest, &c);
    fprintf(f, "%-*s %-18s %-15s %s\n", c.width, "op", "policy", "runs in",
            "PyTorch (CUDA autocast)");
    each_op(table_row, &c);
}

typedef struct json_ctx {
    FILE *f;
    bool first;
} json_ctx;

static void json_row(const op_entry *e, void *p)
{
    json_ctx *c = p;
    FILE *f = c->f;
    fputs(c->first ? "\n  {\"name\": " : ",\n  {\"name\": ", f);
    c->first = false;
    json_string(f, e->ac->op);
    fputs(", \"aten\": [", f);
    for (int i = 0; i < AUTOCAST_MAX_ATEN && e->ac->aten[i]; i++) {
        fputs(i ? ", " : "", f);
        json_string(f, e->ac->aten[i]);
    }
    fprintf(f, "], \"policy\": \"%s\", \"kind\": \"%s\"", policy_word(e->ac->policy), e->kind);
    if (e->owner_key) {
        fprintf(f, ", \"%s\": ", e->owner_key);
        json_string(f, e->owner);
    }
    if (e->row) { /* its operands, and what its backward keeps, in derivatives.yaml's names */
        static const char *const saved[PW_MAX_ARITY] = {"self", "other", "third"};
        fprintf(f, ", \"arity\": %d, \"saves\": [", e->row->arity);
        const char *sep = "";
        for (int k = 0; k < e->row->arity && k < PW_MAX_ARITY; k++)
            if (e->row->backward & PW_SAVES(k)) {
                fprintf(f, "%s\"%s\"", sep, saved[k]);
                sep = ", ";
            }
        if (e->row->backward & PW_SAVE_OUT)
            fprintf(f, "%s\"result\"", sep);
        fputc(']', f);
    }
    if (e->reduces) { /* likewise */
        unsigned bw = e->reduces->backward;
        fprintf(f, ", \"arity\": 1, \"saves\": [%s%s%s]", bw & RD_SAVE_X ? "\"self\"" : "",
                bw & RD_SAVE_X && bw & RD_SAVE_OUT ? ", " : "",
                bw & RD_SAVE_OUT ? "\"result\"" : "");
    }
    fputs(", \"pytorch\": ", f);
    json_string(f, e->ac->pytorch_list);
    fputc('}', f);
}

void ops_print_json(FILE *f)
{
    json_ctx c = {f, true};
    fputc('[', f);
    each_op(json_row, &c);
    fputs("\n]\n", f);
}
