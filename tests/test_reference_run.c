/*
 * test_reference_run.c: docs/reference-run (a committed `make run-cases`) is a whole run, and
 * tools/compare_reference.py, which `make run-cases` ends with, tells a run of other cases,
 * tensors, dtypes or shapes from one whose values alone differ (as another CPU's float32
 * sums make them). The comparisons run on small folders written here by hand.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

/* runs the tool with args; its output into out; returns its exit status */
static int tool(const char *args, char *out, size_t len)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "python3 tools/compare_reference.py %s 2>&1", args);
    return run_command(cmd, out, len);
}

Test(reference_run, the_committed_folder_is_a_whole_run, .timeout = 60)
{
    char out[8192];
    cr_expect_eq(tool("--self-check docs/reference-run", out, sizeof out), 0, "%s", out);
}

/* a run folder of one case "c" whose tensor t has dtype dt and zeros zeros */
static void write_run(const char *dir, const char *dt, int zeros, bool report)
{
    char path[512], text[1024];
    write_file(dir, "REPORT.md", "# cases\n", path, sizeof path);
    write_file(dir, "summary.csv", "case,status,step_ms\nc,ok,1.5\n", path, sizeof path);
    snprintf(path, sizeof path, "mkdir -p %s/c", dir);
    cr_assert_eq(system(path), 0);
    snprintf(text, sizeof text,
             "case,step,pass,order,tensor,role,dtype,shape,numel,bytes,zeros\n"
             "c,0,forward,0,t,activation,%s,4x8,32,%d,%d\n",
             dt, strcmp(dt, "float32") ? 64 : 128, zeros);
    snprintf(path, sizeof path, "%s/c", dir);
    char file[600];
    write_file(path, "tensors.csv", text, file, sizeof file);
    write_file(path, "steps.csv", "case,step,loss,step_ms\nc,0,2.5,3.25\n", file, sizeof file);
    if (report)
        write_file(path, "report.md", "# c\n", file, sizeof file);
}

Test(reference_run, a_case_folder_without_its_report_is_not_a_whole_run)
{
    char dir[256], out[8192], args[512];
    make_temp_dir(dir, sizeof dir);
    write_run(dir, "float16", 0, false);
    snprintf(args, sizeof args, "--self-check %s", dir);
    cr_expect_eq(tool(args, out, sizeof out), 1, "%s", out);
    cr_expect(strstr(out, "missing c/report.md") != NULL, "%s", out);
    rm_rf(dir);
}

Test(reference_run, a_dtype_fails_the_comparison_and_a_count_does_not)
{
    char ref[256], same[256], counts[256], dtype[256], out[8192], args[1024];
    make_temp_dir(ref, sizeof ref);
    make_temp_dir(same, sizeof same);
    make_temp_dir(counts, sizeof counts);
    make_temp_dir(dtype, sizeof dtype);
    write_run(ref, "float16", 3, true);
    write_run(same, "float16", 3, true);
    write_run(counts, "float16", 5, true);
    write_run(dtype, "float32", 3, true);
    snprintf(args, sizeof args, "%s %s", ref, same);
    cr_expect_eq(tool(args, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "every value the same") != NULL, "%s", out);
    snprintf(args, sizeof args, "%s %s", ref, counts);
    cr_expect_eq(tool(args, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "differ (not a failure): tensors.csv 1 in 1 folder") != NULL, "%s", out);
    snprintf(args, sizeof args, "%s %s", ref, dtype);
    cr_expect_eq(tool(args, out, sizeof out), 1, "%s", out);
    cr_expect(strstr(out, "DIFFERS c/tensors.csv: line 2: c,0,forward,0,t,activation,float16,4x8,"
                          "32,64 in the reference, c,0,forward,0,t,activation,float32,4x8,32,128 "
                          "here") != NULL,
              "%s", out);
    /* a case that ran but the reference lacks, and one the reference has but this run lacks */
    snprintf(args, sizeof args, "mv %s/c %s/d", same, same);
    cr_assert_eq(system(args), 0);
    snprintf(args, sizeof args, "--ran cases/d.case %s %s", ref, same);
    cr_expect_eq(tool(args, out, sizeof out), 1, "%s", out);
    cr_expect(strstr(out, "DIFFERS d: ran here, not in the reference") != NULL, "%s", out);
    cr_expect(strstr(out, "DIFFERS c: in the reference, not here") != NULL, "%s", out);
    rm_rf(ref), rm_rf(same), rm_rf(counts), rm_rf(dtype);
}
