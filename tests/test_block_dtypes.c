/*
 * test_block_dtypes.c: the dtypes the block cases expect are PyTorch's. Each
 * cases/{llama,vit,unet}-block-*.case tags every [model] line that stands for one of
 * PyTorch's tensors with `# ref: NAME`, NAME a tensor of the CSV its header names
 * (tests/references/blocks/<block>-<config>.csv, written by tools/block_dtypes.py from an
 * eager run of the HF / timm / diffusers block under CUDA autocast's dispatcher on fake CUDA
 * tensors). tools/block_expects.py --check compares the case's `[expect] dtype LAYER.out`
 * lines with that CSV, and fails for a tagged line that has none (but a `to` of the dtype its
 * input has, which PyTorch returns as its input). `make run-cases` then holds the run to
 * those lines. Skipped when /usr/bin/python3 is missing.
 */
#include <criterion/criterion.h>
#include <glob.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"

#define PYTHON "/usr/bin/python3"

/* the tests/references/blocks/....csv path a case's header names, into csv */
static bool reference_of(const char *case_path, char *csv, size_t len)
{
    FILE *f = fopen(case_path, "r");
    cr_assert_not_null(f, "%s", case_path);
    char line[1024];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "tests/references/blocks/");
        if (!p)
            continue;
        size_t n = strcspn(p, " \t\n),;:");
        if (n >= len || n < 5 || strncmp(p + n - 4, ".csv", 4) != 0)
            continue;
        memcpy(csv, p, n);
        csv[n] = '\0';
        found = true;
    }
    fclose(f);
    return found;
}

Test(block_dtypes, every_block_case_expects_the_dtypes_of_cuda_autocast_s_dispatcher,
     .timeout = 120)
{
    if (access(PYTHON, X_OK) != 0)
        cr_skip_test("%s not found", PYTHON);
    static const char *const patterns[] = {"cases/llama-block-*.case", "cases/vit-block-*.case",
                                           "cases/unet-block-*.case"};
    int checked = 0;
    for (size_t p = 0; p < sizeof patterns / sizeof patterns[0]; p++) {
        glob_t g;
        if (glob(patterns[p], 0, NULL, &g) != 0)
            continue;
        for (size_t i = 0; i < g.gl_pathc; i++) {
            char csv[512], cmd[2048], out[8192];
            cr_assert(reference_of(g.gl_pathv[i], csv, sizeof csv),
                      "%s names no tests/references/blocks/ CSV", g.gl_pathv[i]);
            snprintf(cmd, sizeof cmd, PYTHON " tools/block_expects.py %s %s --check 2>&1",
                     g.gl_pathv[i], csv);
            int rc = run_command(cmd, out, sizeof out);
            cr_expect_eq(rc, 0, "%s", out);
            /* "..: N dtype lines of outputs, M checked against ..": some were checked */
            cr_expect(strstr(out, " 0 checked") == NULL, "%s", out);
            checked++;
        }
        globfree(&g);
    }
    cr_expect_geq(checked, 1, "no block case found");
}
