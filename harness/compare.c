/* compare.c: the memory comparison table (see compare.h). */
#include "compare.h"

#include <stdlib.h>
#include <string.h>

#include "memory.h"

typedef struct case_numbers {
    double peak[MEM_CATEGORY_COUNT];
    double total;
    long long lost_updates;
    long long grad_underflow, grad_numel;
} case_numbers;

/* the n-th comma-separated field of line (no quoting: these files hold names and numbers) */
static const char *field(const char *line, int n, char *buf, size_t len)
{
    for (int i = 0; i < n && line; i++) {
        line = strchr(line, ',');
        line = line ? line + 1 : NULL;
    }
    if (!line)
        return "";
    size_t k = strcspn(line, ",\n");
    k = k < len - 1 ? k : len - 1;
    memcpy(buf, line, k);
    buf[k] = '\0';
    return buf;
}

static int read_numbers(const char *out, const char *name, case_numbers *c)
{
    char path[4096], line[4096], a[256], b[256];
    memset(c, 0, sizeof *c);
    snprintf(path, sizeof path, "%s/%s/memory.csv", out, name);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "ampscope: %s: no results for case %s (run it first): %m\n", path, name);
        return -1;
    }
    while (fgets(line, sizeof line, f)) {
        field(line, 1, a, sizeof a);
        double peak = atof(field(line, 2, b, sizeof b));
        for (int k = 0; k < MEM_CATEGORY_COUNT; k++)
            if (strcmp(a, mem_category_name((mem_category)k)) == 0)
                c->peak[k] = peak;
        if (strcmp(a, "total") == 0)
            c->total = peak;
    }
    fclose(f);
    snprintf(path, sizeof path, "%s/%s/steps.csv", out, name);
    if ((f = fopen(path, "r"))) {
        while (fgets(line, sizeof line, f))
            c->lost_updates += atoll(field(line, 8, a, sizeof a));
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/summary.csv", out);
    if ((f = fopen(path, "r"))) {
        while (fgets(line, sizeof line, f))
            if (strcmp(field(line, 0, a, sizeof a), name) == 0) {
                c->grad_underflow = atoll(field(line, 12, a, sizeof a));
                c->grad_numel = atoll(field(line, 13, a, sizeof a));
            }
        fclose(f);
    }
    return 0;
}

int compare_cases(const case_config *cfgs, int n, const char *out, FILE *f)
{
    case_numbers *nums = calloc((size_t)n, sizeof *nums);
    if (!nums)
        return 2;
    for (int i = 0; i < n; i++)
        if (read_numbers(out, cfgs[i].name, &nums[i])) {
            free(nums);
            return 2;
        }
    const double mib = 1024.0 * 1024.0;
    fprintf(f, "peak MiB by category; ratio = total / the baseline's total\n");
    fprintf(f, "%-30s", "case");
    for (int k = 0; k < MEM_CATEGORY_COUNT; k++)
        fprintf(f, " %10.10s", mem_category_name((mem_category)k));
    fprintf(f, " %10s %8s %12s %10s\n", "total", "ratio", "lost_upd", "underflow");
    for (int i = 0; i < n; i++) {
        const case_numbers *c = &nums[i];
        fprintf(f, "%-30.30s", cfgs[i].name);
        for (int k = 0; k < MEM_CATEGORY_COUNT; k++)
            fprintf(f, " %10.1f", c->peak[k] / mib);
        case_numbers base;
        char ratio[32] = "-";
        if (cfgs[i].baseline[0] && read_numbers(out, cfgs[i].baseline, &base) == 0 &&
            base.total > 0)
            snprintf(ratio, sizeof ratio, "%.3f", c->total / base.total);
        char under[32] = "-";
        if (c->grad_numel)
            snprintf(under, sizeof under, "%.4f%%",
                     100.0 * (double)c->grad_underflow / (double)c->grad_numel);
        fprintf(f, " %10.1f %8s %12lld %10s\n", c->total / mib, ratio, c->lost_updates, under);
    }
    free(nums);
    return 0;
}
