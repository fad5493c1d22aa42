/*
 * test_gpu_path.c: the parts of the GPU path a machine without a GPU can check: which
 * cuDNN convolution algorithms kernels/conv2d.cu may run (kernels/conv_algo.h, for every
 * value of cuDNN's enums), that a CUDA library which fails to open, or is missing, leaves
 * `--device auto` running on the CPU with its one-line note, and that
 * lib/libampscope_cuda.so carries a run path to the toolkit it was linked against, and that
 * the Makefile builds for the architecture nvidia-smi reports (else sm_90).
 * The cuDNN, run-path and architecture tests need the toolkit at build time (the Makefile defines
 * AMPSCOPE_CUDA_HOME then) and skip themselves without it.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"

#ifdef AMPSCOPE_CUDA_HOME
#include "../kernels/conv_algo.h"

/* the allowed algorithms, written out from cuDNN's documentation: every other value refused */
Test(gpu_path, conv_algorithms_only_the_exact_deterministic_ones)
{
    static const int fwd_ok[] = {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                 CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                                 CUDNN_CONVOLUTION_FWD_ALGO_GEMM};
    static const int data_ok[] = {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1};
    static const int filter_ok[] = {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1};
    static const struct {
        conv_pass pass;
        int count;
        const int *ok;
        int n_ok;
    } passes[3] = {
        {CONV_FORWARD, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, fwd_ok, 3},
        {CONV_BACKWARD_DATA, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, data_ok, 1},
        {CONV_BACKWARD_FILTER, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, filter_ok, 1},
    };
    for (int p = 0; p < 3; p++) {
        cr_expect_eq(conv_algo_count(passes[p].pass), passes[p].count);
        int allowed = 0;
        for (int a = -1; a <= passes[p].count + 1; a++) { /* and the values around the enum */
            bool want = false;
            for (int k = 0; k < passes[p].n_ok; k++)
                want |= passes[p].ok[k] == a;
            cr_expect_eq(conv_algo_exact(passes[p].pass, a), want, "%s algorithm %d: %s",
                         conv_pass_name(passes[p].pass), a, want ? "refused" : "allowed");
            allowed += conv_algo_exact(passes[p].pass, a);
        }
        cr_expect_eq(allowed, passes[p].n_ok);
    }
    /* the ones that add with atomics (cuDNN's header marks them non-deterministic) and the
     * transforms, named one by one */
    cr_expect(!conv_algo_exact(CONV_BACKWARD_DATA, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0));
    cr_expect(!conv_algo_exact(CONV_BACKWARD_FILTER, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0));
    cr_expect(!conv_algo_exact(CONV_BACKWARD_FILTER, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3));
    cr_expect(!conv_algo_exact(CONV_FORWARD, CUDNN_CONVOLUTION_FWD_ALGO_FFT));
    cr_expect(!conv_algo_exact(CONV_FORWARD, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED));
    cr_expect(!conv_algo_exact(CONV_BACKWARD_DATA, CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING));
    cr_expect(
        !conv_algo_exact(CONV_BACKWARD_FILTER, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED));
}

/* RUNPATH (or RPATH) of the library names the toolkit's lib64 and $ORIGIN */
Test(gpu_path, cuda_library_has_a_run_path_to_its_toolkit)
{
    const char *lib = "lib/libampscope_cuda.so";
    if (access(lib, R_OK) != 0)
        cr_skip_test("%s not built", lib);
    FILE *p = popen("readelf -d lib/libampscope_cuda.so", "r");
    cr_assert_not_null(p);
    char line[4096], path[4096] = "";
    while (fgets(line, sizeof line, p))
        if (strstr(line, "(RUNPATH)") || strstr(line, "(RPATH)"))
            snprintf(path, sizeof path, "%s", line);
    cr_assert_eq(pclose(p), 0, "readelf -d failed");
    cr_assert(path[0], "%s has no RUNPATH or RPATH", lib);
    char want[1024];
    snprintf(want, sizeof want, "%s/lib64", AMPSCOPE_CUDA_HOME);
    cr_expect(strstr(path, want) != NULL, "run path does not name %s: %s", want, path);
    cr_expect(strstr(path, "$ORIGIN") != NULL, "run path does not name $ORIGIN: %s", path);
}
/* the first line of `make -n clean`'s output naming the architecture, with nvidia-smi
 * replaced by a script printing `cap` (NULL: one that fails) */
static void arch_line(const char *dir, const char *cap, char *line, size_t len)
{
    char path[512], cmd[2048];
    snprintf(path, sizeof path, "%s/nvidia-smi", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    if (cap)
        fprintf(f, "#!/bin/sh\necho '%s'\n", cap);
    else
        fprintf(f, "#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n");
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "chmod +x %s && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u CUDA_ARCH PATH=%s:$PATH "
             "make -n --no-print-directory clean 2>&1",
             path, dir);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    line[0] = '\0';
    char buf[1024];
    while (fgets(buf, sizeof buf, p))
        if (!line[0] && strncmp(buf, "CUDA architecture: ", 19) == 0)
            snprintf(line, len, "%s", buf);
    pclose(p);
}

Test(gpu_path, cuda_arch_from_nvidia_smi_else_90, .timeout = 60)
{
    char dir[256], line[1024];
    make_temp_dir(dir, sizeof dir);
    arch_line(dir, "8.6", line, sizeof line);
    cr_expect_str_eq(line, "CUDA architecture: sm_86 (this machine's GPU, from nvidia-smi)\n");
    arch_line(dir, "9.0", line, sizeof line);
    cr_expect_str_eq(line, "CUDA architecture: sm_90 (this machine's GPU, from nvidia-smi)\n");
    arch_line(dir, NULL, line, sizeof line);
    cr_expect_str_eq(line, "CUDA architecture: sm_90 (the default: no GPU seen by nvidia-smi)\n");
    rm_rf(dir);
}
#else
Test(gpu_path, cuda_arch_from_nvidia_smi_else_90)
{
    cr_skip_test("built without the CUDA toolkit");
}

Test(gpu_path, conv_algorithms_only_the_exact_deterministic_ones)
{
    cr_skip_test("built without the CUDA toolkit (no cudnn.h)");
}

Test(gpu_path, cuda_library_has_a_run_path_to_its_toolkit)
{
    cr_skip_test("built without the CUDA toolkit");
}
#endif

/* runs `env bin args`, stdout dropped; stderr into err; returns the exit status */
static int run_stderr(const char *env, const char *args, char *err, size_t len)
{
    const char *bin = getenv("AMPSCOPE") ? getenv("AMPSCOPE") : "bin/ampscope";
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s %s 2>&1 >/dev/null", env, bin, args);
    return run_command(cmd, err, len);
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* A library whose open fails the way kernels/backend_cuda.cu reports a failed cudnnCreate:
 * auto runs on the CPU with one line, cuda exits 2 with the same message. */
Test(gpu_path, a_library_that_fails_to_open_leaves_auto_on_the_cpu, .timeout = 120)
{
    char dir[256], src[512], cmd[2048], env[600], args[1024], err[8192];
    make_temp_dir(dir, sizeof dir);
    write_file(dir, "fake.c",
               "#include <stdio.h>\n"
               "#include \"ops/backend.h\"\n"
               "backend_abi ampscope_backend_abi(void)\n"
               "{\n"
               "    return (backend_abi){BACKEND_ABI_VERSION, (int64_t)sizeof(struct backend)};\n"
               "}\n"
               "const char *ampscope_backend_rows(void) { return BACKEND_ROW_NAMES; }\n"
               "void *ampscope_backend_cuda_open(void *account, char *err, int errlen)\n"
               "{\n"
               "    (void)account;\n"
               "    snprintf(err, (size_t)errlen, \"no usable CUDA device: cuDNN could not be \"\n"
               "             \"initialised: CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED\");\n"
               "    return NULL;\n"
               "}\n",
               src, sizeof src);
    snprintf(cmd, sizeof cmd, "cc -std=c11 -Iharness -shared -fPIC %s -o %s/libampscope_cuda.so",
             src, dir);
    cr_assert_eq(system(cmd), 0, "could not build the failing library");
    const char *note = "ampscope: no usable CUDA device: cuDNN could not be initialised: "
                       "CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED; running on the CPU\n";

    snprintf(env, sizeof env, "AMPSCOPE_LIB_DIR=%s", dir);
    snprintf(args, sizeof args, "run tests/cases/small-fp32.case --device auto --out %s/r --quiet",
             dir);
    cr_expect_eq(run_stderr(env, args, err, sizeof err), 0, "stderr: %s", err);
    cr_expect_str_eq(err, note);
    snprintf(args, sizeof args, "%s/r/small-fp32/tensors.csv", dir);
    cr_expect_eq(access(args, R_OK), 0, "the CPU run wrote no %s", args);

    snprintf(args, sizeof args, "run tests/cases/small-fp32.case --device cuda --out %s/c --quiet",
             dir);
    cr_expect_eq(run_stderr(env, args, err, sizeof err), 2, "stderr: %s", err);
    cr_expect(strstr(err, "cuDNN could not be initialised: CUDNN_STATUS_SUBLIBRARY") != NULL,
              "got: %s", err);
    cr_expect(strstr(err, "running on the CPU") == NULL, "got: %s", err);
    rm_rf(dir);
}

/* a folder without the library: the same fallback, the loader's reason in the note */
Test(gpu_path, a_missing_library_leaves_auto_on_the_cpu, .timeout = 120)
{
    char dir[256], env[600], args[1024], err[8192];
    make_temp_dir(dir, sizeof dir);
    snprintf(env, sizeof env, "AMPSCOPE_LIB_DIR=%s", dir);
    snprintf(args, sizeof args, "run tests/cases/small-fp32.case --device auto --out %s/r --quiet",
             dir);
    cr_expect_eq(run_stderr(env, args, err, sizeof err), 0, "stderr: %s", err);
    cr_expect_eq(count_lines(err), 1, "stderr: %s", err);
    cr_expect(strstr(err, "ampscope: no usable CUDA device: ") == err, "got: %s", err);
    cr_expect(strstr(err, "libampscope_cuda.so: cannot open shared object file") != NULL,
              "got: %s", err);
    cr_expect(strstr(err, "; running on the CPU\n") != NULL, "got: %s", err);
    rm_rf(dir);
}

/* A CUDA library that leaves MXFP8's ops out (tests/fixtures/backend/no_mxfp8.c, as the GPU
 * backend does): its table passes the loader's check, and an MXFP8 case is refused before it
 * runs, at its [fp8] recipe line (line 39 of tests/cases/small-fp8-mxfp8.case), exit 2. */
Test(gpu_path, a_backend_without_mxfp8_refuses_the_case_at_its_recipe_line, .timeout = 120)
{
    char dir[256], cmd[2048], env[600], args[1024], err[8192];
    make_temp_dir(dir, sizeof dir);
    snprintf(cmd, sizeof cmd,
             "cc -std=c11 -Iharness -shared -fPIC tests/fixtures/backend/no_mxfp8.c -o "
             "%s/libampscope_cuda.so",
             dir);
    cr_assert_eq(system(cmd), 0, "could not build the stand-in library");
    snprintf(env, sizeof env, "AMPSCOPE_LIB_DIR=%s", dir);
    snprintf(args, sizeof args,
             "run tests/cases/small-fp32.case tests/cases/small-fp8-mxfp8.case --device cuda "
             "--out %s/r --quiet",
             dir);
    cr_expect_eq(run_stderr(env, args, err, sizeof err), 2, "stderr: %s", err);
    cr_expect(strstr(err, "tests/cases/small-fp8-mxfp8.case:39: recipe = mxfp8 on the no-mxfp8 "
                          "backend (a stand-in GPU): MXFP8 runs on the CPU only") == err,
              "got: %s", err);
    cr_expect(strstr(err, "---> HINT: run the case with --device cpu\n") != NULL, "got: %s", err);
    cr_expect(strstr(err, "stand-in library") == NULL, "an op ran: %s", err);
    snprintf(args, sizeof args, "%s/r", dir);
    cr_expect_neq(access(args, F_OK), 0, "a case ran: %s exists", args);
    rm_rf(dir);
}
