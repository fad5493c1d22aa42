/*
 * case/load.c: reads, checks and normalizes a case file (load.h); the files it is cut into are
 * listed in case/parse.h.
 *
 * case_load works in three passes over one parse_ctx:
 *  1. read (case/read.c): the file is read whole, checked to be UTF-8 text without control
 *     bytes, and cut into lines; each line is a [section] header or an entry (section, key,
 *     value, line). --set overrides then replace or add entries; an entry from an override
 *     keeps the override's text, which its error messages show instead of file:line.
 *  2. sections (case/sections.c, case/model.c, case/optim.c): each section's entries are
 *     parsed into cfg, on top of the defaults.
 *  3. cross checks (case/check.c): the shape walk over the layers (filling each out_shape
 *     and the memory limits), loss against target, master weights against params, observe
 *     against steps, the .npy files against the shapes.
 * Errors are kept with their line and appended to errs at the end, sorted by line (those of
 * overrides last). An entry whose value was refused is marked failed, so that the cross
 * checks skip it rather than report the same mistake twice.
 *
 * Choices the format leaves open: loss_in_autocast = no with autocast = off is accepted (it
 * changes nothing); without a loss key the loss is cross_entropy, without an optimizer key
 * the optimizer is sgd with PyTorch's defaults (lr=1e-3); a [scaler] section without
 * `enabled` means enabled; a 2-d data shape is accepted (flatten, relu take it).
 */
#include "parse.h"

#include "train/optimizers.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- memory and messages ---- */

static void out_of_memory(void)
{
    (void)fputs("ampscope: out of memory\n", stderr);
    abort();
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q)
        out_of_memory();
    return q;
}

char *xstrdup(const char *s)
{
    char *d = strdup(s);
    if (!d)
        out_of_memory();
    return d;
}

static char *xvasprintf(const char *fmt, va_list ap)
{
    char *s;
    if (vasprintf(&s, fmt, ap) < 0)
        out_of_memory();
    return s;
}

PRINTF_LIKE(1, 2) char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = xvasprintf(fmt, ap);
    va_end(ap);
    return s;
}

/* Returns p with room for `need` elements of `size` bytes; *cap is its capacity. */
void *grow(void *p, int *cap, int need, size_t size)
{
    if (need <= *cap)
        return p;
    int cap2 = *cap > 0 ? *cap * 2 : 16;
    while (cap2 < need)
        cap2 *= 2;
    *cap = cap2;
    return xrealloc(p, (size_t)cap2 * size);
}

static void err_list_push(err_list *e, char *msg)
{
    e->msgs = grow(e->msgs, &e->cap, e->n + 1, sizeof *e->msgs);
    e->msgs[e->n++] = msg;
}

void err_list_add(err_list *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = xvasprintf(fmt, ap);
    va_end(ap);
    err_list_push(e, msg);
}

void err_list_free(err_list *e)
{
    for (int i = 0; i < e->n; i++)
        free(e->msgs[i]);
    free(e->msgs);
    e->msgs = NULL;
    e->n = e->cap = 0;
}

static void vreport(parse_ctx *c, int line, const char *set, const char *fmt, va_list ap)
{
    char *msg = xvasprintf(fmt, ap);
    pending p = {.line = set ? INT_MAX : line, .seq = c->n_errs};
    while (set && p.set < c->n_sets && c->sets[p.set] != set)
        p.set++;
    p.msg = set ? xasprintf("--set %s: %s", set, msg) : xasprintf("%s:%d: %s", c->path, line, msg);
    free(msg);
    c->errs = grow(c->errs, &c->cap_errs, c->n_errs + 1, sizeof *c->errs);
    c->errs[c->n_errs++] = p;
}

/* An error at a line of the file (0: none applies), or about an override when set != NULL. */
PRINTF_LIKE(4, 5) void report(parse_ctx *c, int line, const char *set, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(c, line, set, fmt, ap);
    va_end(ap);
}

/* An error about entry e, which is marked failed. */
PRINTF_LIKE(3, 4) void err_at(parse_ctx *c, entry *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    e->failed = true;
    vreport(c, e->line, e->set, fmt, ap);
    va_end(ap);
}

static int cmp_pending(const void *a, const void *b)
{
    const pending *x = a, *y = b;
    if (x->line != y->line)
        return x->line < y->line ? -1 : 1;
    if (x->set != y->set)
        return x->set < y->set ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* ---- entry points ---- */

static void set_defaults(case_config *cfg, const char *path, int n_sets)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->n_sets = n_sets;
    cfg->loss_in_autocast = true;
    cfg->init_scale = 65536.0;
    cfg->growth_factor = 2.0;
    cfg->backoff_factor = 0.5;
    cfg->growth_interval = 2000;
    cfg->optim = optim_default(OPTIM_CASE_DEFAULT);
    cfg->steps = 1;
    cfg->fp8_format = FP8_FORMAT_HYBRID;
    cfg->fp8_recipe = FP8_RECIPE_DELAYED;
    cfg->fp8_amax_history_len = 1024;
    if (strlen(path) >= CASE_PATH_MAX)
        return;
    strcpy(cfg->path, path);
    const char *slash = strrchr(path, '/');
    if (!slash)
        strcpy(cfg->dir, ".");
    else if (slash == path)
        strcpy(cfg->dir, "/");
    else
        memcpy(cfg->dir, path, (size_t)(slash - path));
}

int case_load(const char *path, const char *const *sets, int n_sets, case_config *cfg,
              err_list *errs)
{
    parse_ctx c = {.cfg = cfg, .path = path, .sets = sets, .n_sets = n_sets};
    set_defaults(cfg, path, n_sets);
    if (!cfg->path[0])
        report(&c, 0, NULL, "case file path too long (at most %d bytes)", CASE_PATH_MAX - 1);
    else if (read_lines(&c)) {
        for (int i = 0; i < n_sets; i++)
            apply_set(&c, sets[i]);
        parse_case_section(&c);
        parse_model_section(&c);
        parse_data_section(&c);
        parse_precision_section(&c);
        parse_scaler_section(&c);
        parse_train_section(&c);
        parse_init_section(&c);
        parse_expect_section(&c);
        parse_distributed_section(&c);
        parse_fp8_section(&c);
        cross_checks(&c);
    }
    if (c.n_errs > 0)
        qsort(c.errs, (size_t)c.n_errs, sizeof *c.errs, cmp_pending);
    for (int i = 0; i < c.n_errs; i++)
        err_list_push(errs, c.errs[i].msg);
    for (int i = 0; i < c.n_set_copies; i++)
        free(c.set_copies[i]);
    free(c.set_copies);
    free(c.entries);
    free(c.errs);
    free(c.text);
    return c.n_errs;
}

