/*
 * test_csv.c: the result files' columns, exactly as results/README.md documents them, and as
 * harness/results/columns.h lists them (every writer's header line is that list), and the
 * invariants every row must satisfy: each histogram sums to its tensor's numel, underflow
 * never exceeds zeros, bytes = numel * element size. Also: running a case again replaces
 * its summary row and keeps the others'.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "results/columns.h"
#include "report/report.h"
#include "helpers.h"
#include "case/load.h"

static const char *const tensors_header =
    "case,step,pass,order,tensor,role,dtype,shape,numel,bytes,zeros,underflow,subnormal,"
    "overflow,nan,amax,amin_nonzero,dtype_reason,op,dtype_from";

Test(csv, columns_are_exactly_the_documented_ones)
{
    char out[256], path[512], line[1024];
    make_temp_dir(out, sizeof out);
    case_result res;
    run_case_file("tests/cases/small-autocast-fp16-scaler.case", out, &res, NULL);
    snprintf(path, sizeof path, "%s/small-autocast-fp16-scaler/tensors.csv", out);
    first_line(path, line, sizeof line);
    cr_expect_str_eq(line, tensors_header);
    snprintf(path, sizeof path, "%s/small-autocast-fp16-scaler/hist.csv", out);
    first_line(path, line, sizeof line);
    cr_expect_str_eq(line, "case,step,pass,tensor,bin,count");
    snprintf(path, sizeof path, "%s/small-autocast-fp16-scaler/steps.csv", out);
    first_line(path, line, sizeof line);
    cr_expect_str_eq(line, "case,step,loss,loss_scale,found_inf,skipped,step_ms,lr,"
                           "lost_updates,first_nonfinite,lost_accumulations,total_norm,clip_coef,"
                           "first_nonfinite_op,first_nonfinite_input");
    snprintf(path, sizeof path, "%s/small-autocast-fp16-scaler/memory.csv", out);
    first_line(path, line, sizeof line);
    cr_expect_str_eq(line, "case,category,peak_bytes,end_bytes,by_dtype");
    snprintf(path, sizeof path, "%s/summary.csv", out);
    first_line(path, line, sizeof line);
    cr_expect_str_eq(line, "case,device,status,error,params,autocast,input_dtype,output_dtype,"
                           "loss_dtype,param_grad_dtypes,cast_grad_dtypes,"
                           "activation_grad_dtypes,grad_underflow,grad_numel,final_loss,"
                           "peak_bytes,step_ms,expect_passed,expect_total");
    rm_rf(out);
}

Test(csv, every_row_is_consistent_with_its_histogram)
{
    char out[256], path[512];
    make_temp_dir(out, sizeof out);
    case_result res;
    run_case_file("tests/cases/small-autocast-fp16.case", out, &res, NULL);
    csv t, h;
    snprintf(path, sizeof path, "%s/small-autocast-fp16/tensors.csv", out);
    cr_assert(csv_read(path, &t));
    snprintf(path, sizeof path, "%s/small-autocast-fp16/hist.csv", out);
    cr_assert(csv_read(path, &h));
    cr_assert_gt(t.n_rows, 30);
    int c_pass = csv_col(&t, "pass"), c_name = csv_col(&t, "tensor"),
        c_numel = csv_col(&t, "numel");
    int c_dtype = csv_col(&t, "dtype"), c_bytes = csv_col(&t, "bytes");
    int h_pass = csv_col(&h, "pass"), h_name = csv_col(&h, "tensor"),
        h_count = csv_col(&h, "count");
    for (int r = 0; r < t.n_rows; r++) {
        char **row = t.rows[r];
        cr_expect_eq(atol(row[csv_col(&t, "underflow")]) <= atol(row[csv_col(&t, "zeros")]), 1);
        long size = strcmp(row[c_dtype], "float32") == 0 ? 4
                    : strcmp(row[c_dtype], "int64") == 0 ? 8
                                                         : 2;
        cr_expect_eq(atol(row[c_bytes]), atol(row[c_numel]) * size, "%s", row[c_name]);
        if (strcmp(row[c_dtype], "int64") == 0)
            continue; /* labels have no histogram */
        long sum = 0;
        for (int k = 0; k < h.n_rows; k++)
            if (strcmp(h.rows[k][h_name], row[c_name]) == 0 &&
                strcmp(h.rows[k][h_pass], row[c_pass]) == 0)
                sum += atol(h.rows[k][h_count]);
        cr_expect_eq(sum, atol(row[c_numel]), "%s (%s): histogram sums to %ld", row[c_name],
                     row[c_pass], sum);
    }
    csv_free(&t);
    csv_free(&h);
    rm_rf(out);
}

Test(csv, a_rerun_replaces_its_summary_row_and_keeps_the_others)
{
    char out[256], path[512];
    make_temp_dir(out, sizeof out);
    case_result res;
    run_case_file("tests/cases/small-fp32.case", out, &res, NULL);
    run_case_file("tests/cases/small-autocast-fp16.case", out, &res, NULL);
    run_case_file("tests/cases/small-fp32.case", out, &res, NULL);
    snprintf(path, sizeof path, "%s/summary.csv", out);
    csv s;
    cr_assert(csv_read(path, &s));
    cr_expect_eq(s.n_rows, 2);
    cr_expect_not_null(csv_find(&s, "case", "small-fp32", NULL, NULL, NULL, NULL));
    cr_expect_not_null(csv_find(&s, "case", "small-autocast-fp16", NULL, NULL, NULL, NULL));
    csv_free(&s);
    rm_rf(out);
}

/* names joined by commas, as a header line lists them */
static void join_names(const csv_columns *c, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int k = 0; k < c->n; k++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", k ? "," : "", c->names[k]);
    cr_assert_lt(n, len);
}

Test(csv, every_writer_prints_the_columns_of_columns_h)
{
    char out[256], dir[512], path[1024], line[2048], joined[2048];
    make_temp_dir(out, sizeof out);
    case_result res;
    const char *file = "tests/cases/small-autocast-fp16-scaler.case";
    run_case_file(file, out, &res, NULL);
    snprintf(dir, sizeof dir, "%s/%.200s", out, res.name);
    const struct {
        const csv_columns *cols;
        const char *dir;
        int n; /* the number of columns results/README.md documents */
    } files[] = {{&csv_tensors, dir, 20}, {&csv_hist, dir, 6},    {&csv_steps, dir, 15},
                 {&csv_memory, dir, 5},   {&csv_config, dir, 33}, {&csv_expect, dir, 5},
                 {&csv_summary, out, 19}};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        const csv_columns *c = files[i].cols;
        cr_expect_eq(c->n, files[i].n, "%s", c->file);
        join_names(c, joined, sizeof joined);
        cr_expect_str_eq(c->header, joined, "%s: the header line is the names joined", c->file);
        snprintf(path, sizeof path, "%s/%s", files[i].dir, c->file);
        first_line(path, line, sizeof line);
        cr_expect_str_eq(line, joined, "%s: the header written", c->file);
    }
    join_names(&csv_bench, joined, sizeof joined);
    cr_expect_str_eq(csv_bench.header, joined);
    cr_expect_eq(csv_bench.n, 17);
    rm_rf(out);
}
