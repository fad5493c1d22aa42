/*
 * test_report.c: report.md and REPORT.md quote the CSV files of the same run. Each test runs
 * cases into a temporary folder, writes the reports, and recomputes here, from tensors.csv,
 * steps.csv and summary.csv, the numbers the reports must hold: every tensor table row (its
 * underflow and subnormal percentages from the counts), the sentences on the gradients'
 * dtypes, the underflow of a fixture whose losses are known by construction, the GradScaler's
 * counts, and REPORT.md's one row per case with its baseline ratio.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/npy.h"
#include "report/report.h"
#include "helpers.h"
#include "case/load.h"

/* the whole file (a text file: no NUL byte), NUL-terminated */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot read %s", path);
    char *buf = NULL;
    size_t cap = 0;
    cr_assert_gt(getdelim(&buf, &cap, '\0', f), 0, "cannot read %s", path);
    cr_assert_eq(fclose(f), 0);
    return buf;
}

/* Runs a case file into out, which writes its report.md; returns the case's folder. */
static void run_and_report(const char *path, const char *out, char *dir, int len, case_result *res)
{
    run_case_file(path, out, res, NULL);
    snprintf(dir, (size_t)len, "%s/%.200s", out, res->name);
}

/* The percentage rule report.md states: 100 * count / total with %.2f, 0 for none, <0.01%
 * for a non-zero count that would print as 0.00%. */
static void pct(long count, long total, char *buf, size_t len)
{
    if (count == 0) {
        snprintf(buf, len, "0");
        return;
    }
    snprintf(buf, len, "%.2f%%", 100.0 * (double)count / (double)total);
    if (strcmp(buf, "0.00%") == 0)
        snprintf(buf, len, "<0.01%%");
}

/* a count cell of the tensor table: "0", or "12.34% (56)" */
static void cell(long count, long total, char *buf, size_t len)
{
    char p[32];
    pct(count, total, p, sizeof p);
    if (count == 0)
        snprintf(buf, len, "0");
    else
        snprintf(buf, len, "%s (%ld)", p, count);
}

static const char *col(const csv *c, char **row, const char *name) { return row[csv_col(c, name)]; }

/* Every row of step 0 in tensors.csv appears in report.md's table with the same numbers. */
static void expect_tensor_table(const char *dir, const char *md)
{
    char path[512];
    snprintf(path, sizeof path, "%s/tensors.csv", dir);
    csv t;
    cr_assert(csv_read(path, &t));
    int k = 0;
    for (int r = 0; r < t.n_rows; r++) {
        char **row = t.rows[r];
        if (strcmp(col(&t, row, "step"), "0"))
            continue;
        char line[1024], under[64], sub[64];
        long numel = atol(col(&t, row, "numel"));
        bool counted = col(&t, row, "zeros")[0] != '\0';
        cell(atol(col(&t, row, "underflow")), numel, under, sizeof under);
        cell(atol(col(&t, row, "subnormal")), numel, sub, sizeof sub);
        snprintf(line, sizeof line,
                 "| %d | %s | `%s` | %s | %s | %s | %ld | %s | %s | %s | %s | %s |", ++k,
                 col(&t, row, "pass"), col(&t, row, "tensor"), col(&t, row, "role"),
                 col(&t, row, "dtype"), col(&t, row, "shape"), numel, counted ? under : "–",
                 counted ? sub : "–", counted ? col(&t, row, "overflow") : "–",
                 counted ? col(&t, row, "nan") : "–", counted ? col(&t, row, "amax") : "–");
        cr_expect_not_null(strstr(md, line), "report.md lacks the row\n%s", line);
    }
    cr_expect_gt(k, 0);
    csv_free(&t);
}

Test(report, quotes_every_tensor_row_and_names_the_gradient_dtypes)
{
    char out[256], dir[512], path[600];
    make_temp_dir(out, sizeof out);
    case_result res;
    run_and_report("tests/cases/small-autocast-fp16-scaler.case", out, dir, sizeof dir, &res);
    snprintf(path, sizeof path, "%s/report.md", dir);
    char *md = slurp(path);
    expect_tensor_table(dir, md);

    /* the answer: float32 .grad, computed as the gradients of float16 copies */
    cr_expect_not_null(strstr(md, "**Parameter gradients (`.grad`): float32.**"));
    cr_expect_not_null(strstr(md, "were computed in float16, as the gradients of autocast's "
                                  "float16 copies of the parameters ("));
    cr_expect_not_null(strstr(md, "`fc1.weight@float16.grad`"));
    cr_expect_not_null(strstr(md, "and cast to float32 when autograd accumulated them"));
    cr_expect_not_null(strstr(md, "**Activation gradients:** float16 for `fc3.out.grad`, "
                                  "`fc2.out.grad`, `relu.out.grad` and `fc1.out.grad`; float32"));
    cr_expect_not_null(strstr(md, "## GradScaler\n\nIn step 0 the loss was multiplied by 65536"));

    /* the copies' underflow, recomputed from their rows */
    snprintf(path, sizeof path, "%s/tensors.csv", dir);
    csv t;
    cr_assert(csv_read(path, &t));
    long under = 0, numel = 0, sub = 0;
    for (int r = 0; r < t.n_rows; r++)
        if (!strcmp(col(&t, t.rows[r], "role"), "grad_cast") &&
            !strcmp(col(&t, t.rows[r], "dtype"), "float16")) {
            under += atol(col(&t, t.rows[r], "underflow"));
            sub += atol(col(&t, t.rows[r], "subnormal"));
            numel += atol(col(&t, t.rows[r], "numel"));
        }
    csv_free(&t);
    char want[256], p[32];
    pct(under, numel, p, sizeof p);
    if (under)
        snprintf(want, sizeof want,
                 "In step 0, %s (%ld of %ld) values of these copies' "
                 "gradients underflowed",
                 p, under, numel);
    else
        snprintf(want, sizeof want,
                 "In step 0, 0 of %ld values of these copies' gradients "
                 "underflowed",
                 numel);
    cr_expect_not_null(strstr(md, want), "report.md lacks: %s", want);
    cr_expect_eq(numel, 512 + 32 + 1024 + 32 + 256 + 8);

    /* summary.csv's totals */
    snprintf(want, sizeof want, "%lld of %lld gradient values", (long long)res.grad_underflow,
             (long long)res.grad_numel);
    cr_expect_not_null(strstr(md, want), "report.md lacks: %s", want);
    free(md);

    /* config.csv: one row, what REPORT.md needs */
    snprintf(path, sizeof path, "%s/config.csv", dir);
    cr_assert(csv_read(path, &t));
    cr_expect_eq(t.n_rows, 1);
    cr_expect_str_eq(col(&t, t.rows[0], "scaler"), "yes");
    cr_expect_str_eq(col(&t, t.rows[0], "baseline"), "small-fp32");
    cr_expect_str_eq(col(&t, t.rows[0], "description"),
                     "fp32 weights, autocast fp16, GradScaler (question 000's code)");
    csv_free(&t);
    rm_rf(out);
}

static void write_npy(const char *dir, const char *name, int ndim, const int64_t *shape,
                      const float *v)
{
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    cr_assert_eq(npy_write(path, DTYPE_FLOAT32, ndim, shape, v, err, sizeof err), 0, "%s", err);
}

/*
 * A fixture whose underflow is known by construction (as in test_exact_counts.c): one linear
 * layer 1 -> 64 without bias, weights 0, input 1, autocast float16, GradScaler of scale 16,
 * mse against t, so that fc.out@float32.grad = 2/64 * (0 - t) * 16 = -t / 2 exactly. t puts 5
 * gradients at 2^-26 (below 2^-25: they underflow in the cast to float16), 7 at 2^-20
 * (subnormal) and 52 at 2^-10.
 */
Test(report, underflow_known_by_construction_is_quoted_with_its_percentage)
{
    char out[256], path[600], dir[512];
    make_temp_dir(out, sizeof out);
    float one[1] = {1}, zeros[64] = {0}, target[64];
    for (int i = 0; i < 64; i++)
        target[i] = -2.0f * ldexpf(1, i < 5 ? -26 : i < 12 ? -20 : -10);
    int64_t in_shape[2] = {1, 1}, w_shape[2] = {64, 1}, t_shape[2] = {1, 64};
    write_npy(out, "x.npy", 2, in_shape, one);
    write_npy(out, "w.npy", 2, w_shape, zeros);
    write_npy(out, "t.npy", 2, t_shape, target);
    write_file(out, "under.case",
               "[case]\nname = under\n[model]\nfc = linear 1 -> 64 bias=no\n"
               "[data]\nbatch = 1\ninput = file x.npy\ntarget = file t.npy\n"
               "[precision]\nautocast = float16\n[scaler]\ninit_scale = 16\n"
               "[train]\nloss = mse\noptimizer = sgd lr=0.1\n[init]\nfc.weight = file w.npy\n",
               path, sizeof path);
    case_result res;
    run_and_report(path, out, dir, sizeof dir, &res);
    snprintf(path, sizeof path, "%s/tensors.csv", dir);
    csv t;
    cr_assert(csv_read(path, &t));
    char **g = csv_find(&t, "tensor", "fc.out.grad", "pass", "backward", NULL, NULL);
    cr_assert_not_null(g);
    long under = atol(col(&t, g, "underflow")), sub = atol(col(&t, g, "subnormal"));
    long numel = atol(col(&t, g, "numel"));
    cr_assert_eq(under, 5);
    cr_assert_eq(sub, 7);
    /* the float16 gradient rows of the backward pass: fc.out.grad and the weight copy's */
    char **w = csv_find(&t, "tensor", "fc.weight@float16.grad", "pass", "backward", NULL, NULL);
    cr_assert_not_null(w);
    long half_numel = numel + atol(col(&t, w, "numel"));
    long half_under = under + atol(col(&t, w, "underflow"));
    csv_free(&t);

    snprintf(path, sizeof path, "%s/report.md", dir);
    char *md = slurp(path);
    expect_tensor_table(dir, md);
    char want[512], p[32], q[32];
    pct(under, numel, p, sizeof p);
    pct(sub, numel, q, sizeof q);
    cr_expect_str_eq(p, "7.81%"); /* 5 / 64 = 7.8125% */
    snprintf(want, sizeof want,
             "| `fc.out.grad` | grad_activation | float16 | 1x64 | 64 | %s (5) "
             "| %s (7) |",
             p, q);
    cr_expect_not_null(strstr(md, want), "report.md lacks: %s", want);
    snprintf(want, sizeof want,
             "In step 0, %s (%ld of %ld) values of the float16 activation "
             "gradients underflowed to zero: `fc.out.grad` %s (%ld of %ld)",
             p, under, numel, p, under, numel);
    cr_expect_not_null(strstr(md, want), "report.md lacks: %s", want);
    /* Divided by 16 = 2^4, the bins of fc.out.grad's values before the rounding move from
     * -26, -20, -10 to -30, -24, -14: only the 5 were below 2^-25 already; the copy's
     * gradient holds the rounded values (5 zeros, 7 at 2^-20 -> 2^-24, not below 2^-25). */
    char share[96];
    pct(5, half_numel, p, sizeof p);
    snprintf(share, sizeof share, "%s (5 of %ld)", p, half_numel);
    snprintf(want, sizeof want,
             "Divided by the scale, 2^4, that is at their size without the "
             "scaler, %s values",
             share);
    cr_expect_not_null(strstr(md, want), "report.md lacks: %s", want);
    pct(half_under, half_numel, p, sizeof p);
    snprintf(want, sizeof want, "with the scaler, %s (%ld of %ld) underflowed", p, half_under,
             half_numel);
    cr_expect_not_null(strstr(md, want), "report.md lacks: %s", want);
    free(md);
    rm_rf(out);
}

Test(report, an_error_is_told_with_what_pytorch_does)
{
    char out[256], dir[512], path[600];
    make_temp_dir(out, sizeof out);
    case_result res;
    run_and_report("tests/cases/small-half-autocast-scaler.case", out, dir, sizeof dir, &res);
    snprintf(path, sizeof path, "%s/report.md", dir);
    char *md = slurp(path);
    cr_expect_not_null(strstr(md, "## Error\n\nThe run ended in an error after 0 completed "
                                  "steps (the case expects it):\n\n    ValueError: Attempting to "
                                  "unscale FP16 gradients.\n"));
    cr_expect_not_null(strstr(md, "What PyTorch does: PyTorch raises this ValueError in "
                                  "`GradScaler.unscale_()`"));
    cr_expect_not_null(strstr(md, "**Parameter gradients (`.grad`): float16.** The gradients of "));
    cr_expect_not_null(strstr(md, "were computed directly in float16"));
    free(md);
    rm_rf(out);
}

/* REPORT.md: one table row per summary.csv row, its numbers recomputed from the CSVs. */
Test(report, report_all_has_one_row_per_case)
{
    char out[256], dir[512], path[600], err[1024];
    make_temp_dir(out, sizeof out);
    case_result res;
    run_and_report("tests/cases/small-fp32.case", out, dir, sizeof dir, &res);
    run_and_report("tests/cases/small-autocast-fp16-scaler.case", out, dir, sizeof dir, &res);
    run_and_report("tests/cases/small-fp16-input.case", out, dir, sizeof dir, &res);
    cr_assert_eq(report_all(out, NULL, 0, err, sizeof err), 0, "%s", err);
    snprintf(path, sizeof path, "%s/REPORT.md", out);
    char *md = slurp(path);
    int rows = 0;
    for (const char *p = md; (p = strstr(p, "\n| [")); p++)
        rows++;
    snprintf(path, sizeof path, "%s/summary.csv", out);
    csv s;
    cr_assert(csv_read(path, &s));
    cr_expect_eq(rows, s.n_rows);
    cr_expect_eq(rows, 3);

    char **base = csv_find(&s, "case", "small-fp32", NULL, NULL, NULL, NULL);
    char **amp = csv_find(&s, "case", "small-autocast-fp16-scaler", NULL, NULL, NULL, NULL);
    cr_assert(base && amp);
    long under = atol(col(&s, amp, "grad_underflow")), numel = atol(col(&s, amp, "grad_numel"));
    double peak = (double)atol(col(&s, amp, "peak_bytes"));
    char share[96], p[32], want[1024];
    pct(under, numel, p, sizeof p);
    if (under)
        snprintf(share, sizeof share, "%s (%ld of %ld)", p, under, numel);
    else
        snprintf(share, sizeof share, "0 of %ld", numel);
    snprintf(path, sizeof path, "%s/small-autocast-fp16-scaler/steps.csv", out);
    csv st;
    cr_assert(csv_read(path, &st));
    long lost = 0;
    for (int r = 0; r < st.n_rows; r++)
        lost += atol(col(&st, st.rows[r], "lost_updates"));
    csv_free(&st);
    snprintf(want, sizeof want,
             "| [small-autocast-fp16-scaler](small-autocast-fp16-scaler/"
             "report.md) | ok | float32 | float16 | yes | float16 | float32 | float32 | %s | %ld | "
             "%.2f | %.2f× small-fp32 | %s | %s/%s |",
             share, lost, peak / 1048576.0, peak / (double)atol(col(&s, base, "peak_bytes")),
             col(&s, amp, "step_ms"), col(&s, amp, "expect_passed"), col(&s, amp, "expect_total"));
    cr_expect_not_null(strstr(md, want), "REPORT.md lacks the row\n%s\n%s", want, md);
    cr_expect_not_null(strstr(md, "| [small-fp16-input](small-fp16-input/report.md) | error |"));
    cr_expect_not_null(strstr(md, "[gradient histogram](small-fp32/hist_grads.png)"));
    cr_expect_null(strstr(md, "small-fp16-input/hist_grads.png"));
    cr_expect_null(strstr(md, "In a float8 case"), "REPORT.md of cases without float8");
    csv_free(&s);
    free(md);
    rm_rf(out);
}

/* "U of N" or "p (U of N)", report.md's share */
static void share_of(long count, long total, char *buf, size_t len)
{
    char p[32];
    pct(count, total, p, sizeof p);
    if (count)
        snprintf(buf, len, "%s (%ld of %ld)", p, count, total);
    else
        snprintf(buf, len, "0 of %ld", total);
}

/* A float8 case: the fp8 layers' weight gradients come out of te.Linear's wgrad GEMM in
 * bfloat16 (`L.weight.grad@bfloat16`), from float8 operands, not "directly in float32"; the
 * quantized output gradients' part of "In all" and REPORT.md's note on them, recomputed from
 * tensors.csv. */
Test(report, fp8_weight_gradients_come_from_the_wgrad_gemm)
{
    char out[256], dir[512], path[600], err[1024], want[1024], share[96];
    make_temp_dir(out, sizeof out);
    case_result res;
    run_and_report("tests/cases/small-fp8-delayed.case", out, dir, sizeof dir, &res);
    cr_assert_eq(report_all(out, NULL, 0, err, sizeof err), 0, "%s", err);
    snprintf(path, sizeof path, "%s/report.md", dir);
    char *md = slurp(path);
    cr_expect_not_null(strstr(md, "The gradients of `fc2.weight` and `fc1.weight` were computed "
                                  "in bfloat16 (`fc2.weight.grad@bfloat16` and "
                                  "`fc1.weight.grad@bfloat16`) by te.Linear's weight-gradient "
                                  "GEMM, whose operands were float8 (the output gradient in "
                                  "float8_e5m2, the input in float8_e4m3fn), and cast to float32 "
                                  "into `.grad`."),
                       "%s", md);
    cr_expect_null(strstr(md, "computed directly"));
    snprintf(path, sizeof path, "%s/tensors.csv", dir);
    csv t;
    cr_assert(csv_read(path, &t));
    long w_under = 0, w_numel = 0, q_under = 0, q_numel = 0;
    for (int r = 0; r < t.n_rows; r++) {
        char **row = t.rows[r];
        const char *name = col(&t, row, "tensor"), *dtype = col(&t, row, "dtype");
        if (strcmp(col(&t, row, "pass"), "backward"))
            continue;
        if (!strcmp(col(&t, row, "step"), "0") && strstr(name, ".weight.grad@bfloat16")) {
            w_under += atol(col(&t, row, "underflow"));
            w_numel += atol(col(&t, row, "numel"));
        }
        if (!strncmp(dtype, "float8_", 7)) {
            cr_expect_str_eq(col(&t, row, "role"), "grad_cast", "%s", name);
            q_under += atol(col(&t, row, "underflow"));
            q_numel += atol(col(&t, row, "numel"));
        }
    }
    csv_free(&t);
    cr_assert(w_numel == 2 * 16 * 32 && q_numel > 0);
    share_of(w_under, w_numel, share, sizeof share);
    snprintf(want, sizeof want, "In step 0, %s values of these GEMM outputs underflowed to zero",
             share);
    cr_expect_not_null(strstr(md, want), "report.md lacks: %s", want);
    cr_expect_gt(q_under, 0, "step 0's scale 1 underflows a small output gradient in E5M2");
    share_of(q_under, q_numel, share, sizeof share);
    snprintf(want, sizeof want,
             "They include the float8 copies the fp8 layers quantized their output gradients "
             "into (`fc2.out.grad@float8_e5m2` and the like: multiplied by their scale, then "
             "cast), %s of whose values underflowed.",
             share);
    cr_expect_not_null(strstr(md, want), "report.md lacks: %s", want);
    free(md);
    snprintf(path, sizeof path, "%s/REPORT.md", out);
    md = slurp(path);
    cr_expect_not_null(strstr(md, "In a float8 case the gradient values include the float8 "
                                  "copies te.Linear quantizes the output gradients into"));
    snprintf(path, sizeof path, "%s/summary.csv", out);
    csv s;
    cr_assert(csv_read(path, &s));
    cr_expect_str_eq(col(&s, s.rows[0], "cast_grad_dtypes"), "float32|bfloat16|float8_e5m2");
    csv_free(&s);
    free(md);
    rm_rf(out);
}

Test(report, a_missing_folder_is_an_error_with_a_message)
{
    char err[1024] = "";
    cr_expect_eq(report_all("/nonexistent/ampscope-results", NULL, 0, err, sizeof err), -1);
    cr_expect_not_null(strstr(err, "cannot read /nonexistent/ampscope-results/summary.csv"), "%s",
                       err);
}

/* Why each float32 activation of an autocast case is float32, as the ops that made them
 * recorded it: the GPT block's layer_norm and softmax (float32 policies), its embedding (no
 * list, float32 weight), its residual adds (float32 + float16 promotes), cross_entropy's
 * log_softmax; and a case without autocast says nothing of it. */
Test(report, names_why_each_float32_activation_is_float32)
{
    char out[256], dir[512], path[600];
    make_temp_dir(out, sizeof out);
    case_result res;
    run_and_report("tests/cases/small-gpt-block.case", out, dir, sizeof dir, &res);
    snprintf(path, sizeof path, "%s/report.md", dir);
    char *md = slurp(path);
    const char *want[] = {
        "**Why float32 under autocast:** `tok.out` is float32: embedding is on no autocast "
        "list and its weight `tok.weight` is float32. ",
        "`pos.out` is float32: position_embedding is on no autocast list and its inputs "
        "`tok.out` and `pos.weight` are float32. ",
        "`ln1.out` is float32 because layer_norm runs in float32 under autocast (fp32: "
        "KERNEL_CUDA(layer_norm, fp32)). ",
        "`p.out` is float32 because softmax runs in float32 under autocast",
        "`res1.out` is float32: add is on no autocast list; type promotion of `pos.out` "
        "(float32) and `o.out` (float16) is float32. ",
        "`res2.out` is float32: add is on no autocast list; type promotion of `res1.out` "
        "(float32) and `proj.out` (float16) is float32. ",
        "`log_softmax.out` is float32 because log_softmax runs in float32 under autocast "
        "(fp32_set_opt_dtype: KERNEL_CUDA(log_softmax, fp32_set_opt_dtype))",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_expect_not_null(strstr(md, want[i]), "report.md lacks: %s", want[i]);
    /* float16 activations get no reason */
    cr_expect_null(strstr(md, "`q.out` is float32"));
    free(md);
    rm_rf(out);

    make_temp_dir(out, sizeof out);
    run_and_report("tests/cases/small-fp32.case", out, dir, sizeof dir, &res);
    snprintf(path, sizeof path, "%s/report.md", dir);
    md = slurp(path);
    cr_expect_null(strstr(md, "Why float32"));
    free(md);
    rm_rf(out);
}
