/* sweep.c: sweeps over case keys and their table (see sweep.h). */
#include "sweep.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "results/columns.h"
#include "results/results.h"

static int sweep_fail(char *err, int errlen, const char *arg, const char *why)
{
    snprintf(err, (size_t)errlen, "--sweep %s: %s", arg, why);
    return -1;
}

/* "2^A" with A an integer in [-126, 127]: *k = A */
static bool parse_pow2(const char *s, const char *end, int *k)
{
    if (end - s < 3 || s[0] != '2' || s[1] != '^')
        return false;
    char buf[16];
    size_t n = (size_t)(end - s - 2);
    if (n >= sizeof buf)
        return false;
    memcpy(buf, s + 2, n);
    buf[n] = '\0';
    char *e;
    errno = 0;
    long v = strtol(buf, &e, 10);
    if (*e || e == buf || errno || v < -126 || v > 127)
        return false;
    *k = (int)v;
    return true;
}

static int add_value(sweep_axis *ax, const char *v, const char *arg, char *err, int errlen)
{
    if (ax->n == SWEEP_MAX_VALUES)
        return sweep_fail(err, errlen, arg, "too many values (at most 256 per --sweep)");
    if (strlen(v) >= SWEEP_VALUE_MAX)
        return sweep_fail(err, errlen, arg, "a value is too long");
    snprintf(ax->values[ax->n++], SWEEP_VALUE_MAX, "%s", v);
    return 0;
}

int sweep_parse(const char *arg, sweep_axis *ax, char *err, int errlen)
{
    memset(ax, 0, sizeof *ax);
    const char *eq = strchr(arg, '=');
    const char *dot = strchr(arg, '.');
    if (!eq || !dot || dot > eq || eq - arg >= (long)sizeof ax->key)
        return sweep_fail(err, errlen, arg, "expected SECTION.KEY=V1,V2,...");
    memcpy(ax->key, arg, (size_t)(eq - arg));
    for (const char *p = eq + 1;;) {
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        if (end == p)
            return sweep_fail(err, errlen, arg, "an empty value");
        const char *dots = strstr(p, "..");
        int a, b;
        if (dots && dots < end) { /* 2^A..2^B */
            if (!parse_pow2(p, dots, &a) || !parse_pow2(dots + 2, end, &b) || a > b)
                return sweep_fail(err, errlen, arg,
                                  "a range is written 2^A..2^B with integers A <= B in "
                                  "[-126, 127]");
            for (int k = a; k <= b; k++) {
                char v[SWEEP_VALUE_MAX];
                snprintf(v, sizeof v, "%.17g", ldexp(1.0, k));
                if (add_value(ax, v, arg, err, errlen))
                    return -1;
            }
        } else {
            char v[SWEEP_VALUE_MAX];
            size_t n = (size_t)(end - p) < sizeof v ? (size_t)(end - p) : sizeof v - 1;
            memcpy(v, p, n);
            v[n] = '\0';
            if (parse_pow2(p, end, &a))
                snprintf(v, sizeof v, "%.17g", ldexp(1.0, a));
            if (add_value(ax, v, arg, err, errlen))
                return -1;
        }
        if (!comma)
            break;
        p = comma + 1;
    }
    return 0;
}

int64_t sweep_count(const sweep_axis *axes, int n_axes)
{
    int64_t n = 1;
    for (int i = 0; i < n_axes; i++)
        n *= axes[i].n;
    return n;
}

void sweep_variant(const sweep_axis *axes, int n_axes, int64_t v, char (*sets)[192])
{
    for (int i = n_axes - 1; i >= 0; i--) { /* the last axis varies fastest */
        snprintf(sets[i], 192, "%s=%s", axes[i].key, axes[i].values[v % axes[i].n]);
        v /= axes[i].n;
    }
}

void sweep_collect(const run_record *rec, sweep_row *row)
{
    row->ok = rec->result.ok;
    row->final_loss = rec->result.final_loss;
    row->steps = rec->n_steps;
    for (int64_t i = 0; i < rec->n_steps; i++)
        row->steps_skipped += rec->steps[i].skipped;
    for (int64_t i = 0; i < rec->n_tensors; i++) { /* the backward pass's counted gradients */
        const record_tensor *t = &rec->tensors[i];
        if (t->pass != PASS_BACKWARD || !tensor_role_is_grad(t->role) || !t->counted || t->unseen)
            continue;
        row->grad_underflow += t->underflow;
        row->grad_subnormal += t->subnormal;
        row->grad_overflow += t->overflow;
        row->grad_numel += t->numel;
    }
}

/* "2^10" for a power of two, else the value as written */
static void scale_text(const char *v, char *buf, int len)
{
    double x = strtod(v, NULL);
    int e;
    double m = frexp(x, &e);
    if (x > 0 && m == 0.5)
        snprintf(buf, (size_t)len, "2^%d", e - 1);
    else
        snprintf(buf, (size_t)len, "%s", v);
}

/* the safe window of a sweep of scaler.init_scale alone (see sweep.h) */
static void put_safe_window(FILE *f, const sweep_axis *ax, const sweep_row *rows, int n)
{
    int64_t fewest = -1;
    int safe = 0;
    for (int i = 0; i < n; i++)
        if (rows[i].ok && rows[i].grad_overflow == 0 && rows[i].steps_skipped == 0) {
            safe++;
            if (fewest < 0 || rows[i].grad_underflow < fewest)
                fewest = rows[i].grad_underflow;
        }
    fputs("## Safe loss scales\n\n", f);
    if (!safe) {
        fputs("At every scale swept some gradient overflowed or a step was skipped: no scale "
              "is safe for this case.\n\n",
              f);
        return;
    }
    char t[64];
    fprintf(f, "No gradient overflowed and no step was skipped at %d of %d scales:", safe, n);
    for (int i = 0, k = 0; i < n; i++)
        if (rows[i].ok && rows[i].grad_overflow == 0 && rows[i].steps_skipped == 0) {
            scale_text(ax->values[i], t, sizeof t);
            fprintf(f, "%s %s", k++ ? "," : "", t);
        }
    fprintf(f, ". Of those, the fewest gradient values underflowed (%lld) at:", (long long)fewest);
    int lo = -1, hi = -1;
    for (int i = 0, k = 0; i < n; i++)
        if (rows[i].ok && rows[i].grad_overflow == 0 && rows[i].steps_skipped == 0 &&
            rows[i].grad_underflow == fewest) {
            scale_text(ax->values[i], t, sizeof t);
            fprintf(f, "%s %s", k++ ? "," : "", t);
            lo = lo < 0 ? i : lo;
            hi = i;
        }
    /* the finer measure among those: the fewest subnormal values (precision lost short of
     * zero) */
    int64_t fewest_sub = -1;
    for (int i = 0; i < n; i++)
        if (rows[i].ok && rows[i].grad_overflow == 0 && rows[i].steps_skipped == 0 &&
            rows[i].grad_underflow == fewest &&
            (fewest_sub < 0 || rows[i].grad_subnormal < fewest_sub))
            fewest_sub = rows[i].grad_subnormal;
    fprintf(f, "; of those, the fewest subnormal values (%lld) at:", (long long)fewest_sub);
    for (int i = 0, k = 0; i < n; i++)
        if (rows[i].ok && rows[i].grad_overflow == 0 && rows[i].steps_skipped == 0 &&
            rows[i].grad_underflow == fewest && rows[i].grad_subnormal == fewest_sub) {
            scale_text(ax->values[i], t, sizeof t);
            fprintf(f, "%s %s", k++ ? "," : "", t);
        }
    char a[64], b[64];
    scale_text(ax->values[lo], a, sizeof a);
    scale_text(ax->values[hi], b, sizeof b);
    fprintf(f,
            ".\n\n**Safe window:** %s to %s (init_scale with no overflow, no skipped step and "
            "the fewest underflows). `make plots` draws underflow and overflow against the "
            "scale: sweep.png.\n\n",
            a, b);
}

static int write_report(const char *dir, const char *name, const sweep_axis *axes, int n_axes,
                        const sweep_row *rows, int n, char *err, int errlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/report.md", dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, (size_t)errlen, "cannot write %.900s: %m", path);
        return -1;
    }
    fprintf(f, "# Sweep of %s\n\n%d variants:", name, n);
    for (int i = 0; i < n_axes; i++)
        fprintf(f, "%s `%s` over %d value%s", i ? " by" : "", axes[i].key, axes[i].n,
                axes[i].n == 1 ? "" : "s");
    fputs(", each run as `--set` runs it (its own results in the folder the table names). "
          "Gradient counts are over the backward passes of the observed steps (tensors.csv's "
          "rows with a grad_* role; summary.csv's grad_underflow).\n\n",
          f);
    fputs("| variant | settings | status | steps | skipped | grad underflow | grad subnormal | "
          "grad overflow | grad elements | final loss |\n"
          "|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n",
          f);
    for (int i = 0; i < n; i++) {
        const sweep_row *r = &rows[i];
        fprintf(f, "| %s | `%s` | %s | %lld | %lld | %lld | %lld | %lld | %lld | %.9g |\n",
                r->variant, r->settings, r->ok ? "ran" : "error", (long long)r->steps,
                (long long)r->steps_skipped, (long long)r->grad_underflow,
                (long long)r->grad_subnormal, (long long)r->grad_overflow,
                (long long)r->grad_numel, r->final_loss);
    }
    fputs("\n", f);
    if (n_axes == 1 && strcmp(axes[0].key, "scaler.init_scale") == 0)
        put_safe_window(f, &axes[0], rows, n);
    if (fclose(f)) {
        snprintf(err, (size_t)errlen, "cannot write %.900s: %m", path);
        return -1;
    }
    return 0;
}

int sweep_write(const char *out, const char *name, const sweep_axis *axes, int n_axes,
                const sweep_row *rows, int n_rows, char *err, int errlen)
{
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/%s.sweep", out, name);
    if (mkdir(dir, 0777) && errno != EEXIST) {
        snprintf(err, (size_t)errlen, "cannot create %.900s: %m", dir);
        return -1;
    }
    snprintf(path, sizeof path, "%s/%s", dir, csv_sweep.file);
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, (size_t)errlen, "cannot write %.900s: %m", path);
        return -1;
    }
    fprintf(f, "%s\n", csv_sweep.header);
    for (int i = 0; i < n_rows; i++) {
        const sweep_row *r = &rows[i];
        csv_write_field(f, name);
        fputc(',', f);
        csv_write_field(f, r->variant);
        fputc(',', f);
        csv_write_field(f, r->settings);
        fprintf(f, ",%s,%lld,%lld,%lld,%lld,%lld,%lld,%.9g\n", r->ok ? "ran" : "error",
                (long long)r->steps, (long long)r->steps_skipped, (long long)r->grad_underflow,
                (long long)r->grad_subnormal, (long long)r->grad_overflow,
                (long long)r->grad_numel, r->final_loss);
    }
    if (fclose(f)) {
        snprintf(err, (size_t)errlen, "cannot write %.900s: %m", path);
        return -1;
    }
    return write_report(dir, name, axes, n_axes, rows, n_rows, err, errlen);
}
