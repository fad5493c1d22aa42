/*
 * test_import.c: `ampscope import` (tools/import_model.py) and the cases it writes.
 *
 * Committed imports (tests/imports/NAME.case, its .npy files in tests/imports/NAME/, the
 * script NAME.py it was imported from) run everywhere, without torch, against PyTorch's
 * answers for the same script (tools/import_reference.py, committed in
 * tests/references/import/): the float32 loss and every element of every parameter's .grad,
 * under its state_dict name, within 1e-4 relative to the tensor's largest magnitude, or, for
 * a gradient that cancels (a BatchNorm weight's ahead of another BatchNorm: values 1e-5 of
 * the others'), within four times PyTorch's own float32 error (its float32 against its
 * float64 gradient); and,
 * under autocast float16 and bfloat16 (--set precision.autocast=...), the dtype of every
 * node's output (`NODE.out` in tensors.csv) against CUDA autocast's dispatch of the same
 * exported graph on fake CUDA tensors.
 *
 * Live round trips (suite import_live, run by `make conformance`) import the scripts of
 * tests/imports/ afresh and compute the references with the installed PyTorch; they and the
 * importer's refusals (exit 2, the message, nothing written) need a python that imports torch: AMPSCOPE_PYTHON, else
 * /opt/torch-venv/bin/python, else python3; they skip with a message where none does.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/npy.h"
#include "helpers.h"

static const char *bin(void) { return getenv("AMPSCOPE") ? getenv("AMPSCOPE") : "bin/ampscope"; }

/* a python that imports torch, or NULL */
static const char *torch_python(void)
{
    static const char *found;
    static bool looked;
    if (looked)
        return found;
    looked = true;
    const char *cands[] = {getenv("AMPSCOPE_PYTHON"), "/opt/torch-venv/bin/python", "python3"};
    for (int i = 0; i < 3; i++) {
        char cmd[512], out[256];
        if (!cands[i] || !*cands[i])
            continue;
        snprintf(cmd, sizeof cmd, "%s -c 'import torch' >/dev/null 2>&1", cands[i]);
        if (run_command(cmd, out, sizeof out) == 0)
            return found = cands[i];
    }
    return NULL;
}

#define NEED_TORCH()                                                                               \
    do {                                                                                           \
        if (!torch_python())                                                                       \
            cr_skip_test("no python here imports torch (AMPSCOPE_PYTHON, "                         \
                         "/opt/torch-venv/bin/python, python3): the importer needs it");           \
    } while (0)

/* the live round trips: `make conformance` (AMPSCOPE_IMPORT_LIVE=1), with torch */
#define NEED_LIVE()                                                                                \
    do {                                                                                           \
        if (!getenv("AMPSCOPE_IMPORT_LIVE"))                                                       \
            cr_skip_test("the live imports run in make conformance (AMPSCOPE_IMPORT_LIVE=1)");    \
        NEED_TORCH();                                                                              \
    } while (0)

/* the largest |a - b| / max|b| of each tensor of the reference CSV (tensor,index,value)
 * against the run's dump (DUMP/0/<tensor>.npy) and the loss of steps.csv */
typedef struct errors {
    double loss, grads;
    int n_tensors;
} errors;

static void compare_values(const char *ref_path, const char *dump, const char *steps_path,
                           errors *err)
{
    csv ref, steps;
    cr_assert(csv_read(ref_path, &ref), "no reference %s", ref_path);
    cr_assert(csv_read(steps_path, &steps), "no %s", steps_path);
    int ct = csv_col(&ref, "tensor"), ci = csv_col(&ref, "index"), cv = csv_col(&ref, "value");
    int c64 = csv_col(&ref, "float64");
    *err = (errors){0};
    double want_loss = NAN;
    for (int r = 0; r < ref.n_rows;) {
        const char *name = ref.rows[r][ct];
        if (strcmp(name, "loss") == 0) {
            want_loss = atof(ref.rows[r][cv]);
            r++;
            continue;
        }
        char path[2200], msg[2400];
        snprintf(path, sizeof path, "%s/0/%s.npy", dump, name);
        npy_array a;
        cr_assert_eq(npy_read(path, &a, NULL, msg, sizeof msg), 0, "%s: %s", name, msg);
        cr_assert_eq(a.dt, DTYPE_FLOAT32, "%s is not float32", name);
        const float *got = a.data;
        double maxref = 0, maxdiff = 0, noise = 0;
        int start = r;
        for (; r < ref.n_rows && strcmp(ref.rows[r][ct], name) == 0; r++) {
            int64_t i = atoll(ref.rows[r][ci]);
            cr_assert(i < a.numel, "%s has %lld values, the reference more", name,
                      (long long)a.numel);
            double want = atof(ref.rows[r][cv]), exact = atof(ref.rows[r][c64]);
            maxref = fmax(maxref, fabs(want));
            maxdiff = fmax(maxdiff, fabs((double)got[i] - want));
            noise = fmax(noise, fabs(want - exact));
        }
        cr_expect_eq(r - start, a.numel, "%s: %d reference values for %lld", name, r - start,
                     (long long)a.numel);
        double rel = maxref > 0 ? maxdiff / maxref : maxdiff;
        /* within 1e-4 of the largest value, or (a gradient that cancels, whose float32 value
         * PyTorch itself knows only to its distance from the float64 one) within four times
         * that distance: two float32 sums in different orders each lie about that far from
         * the float64 value, so they differ by up to twice it, and the largest of a tensor's
         * elements by somewhat more */
        cr_expect(rel < 1e-4 || maxdiff <= 1e-4 * maxref + 4 * noise,
                  "%s: largest difference %g relative to its largest value %g; PyTorch's "
                  "float32 is %g from its float64",
                  name, maxdiff, maxref, noise);
        err->grads = fmax(err->grads, rel);
        err->n_tensors++;
        npy_free(&a);
    }
    cr_assert(!isnan(want_loss), "the reference has no loss");
    double got_loss = atof(steps.rows[0][csv_col(&steps, "loss")]);
    err->loss = fabs(got_loss - want_loss) / fabs(want_loss);
    cr_expect(err->loss < 1e-4, "loss %.9g, PyTorch's %.9g", got_loss, want_loss);
    csv_free(&ref);
    csv_free(&steps);
}

/* every node of the reference (node,dtype) that the case has as NODE.out in tensors.csv
 * must have PyTorch's dtype; returns how many were compared */
static int compare_dtypes(const char *ref_path, const char *tensors_path, int *agree)
{
    csv ref, t;
    cr_assert(csv_read(ref_path, &ref), "no reference %s", ref_path);
    cr_assert(csv_read(tensors_path, &t), "no %s", tensors_path);
    int cn = csv_col(&ref, "node"), cd = csv_col(&ref, "dtype"), td = csv_col(&t, "dtype");
    int compared = 0;
    *agree = 0;
    for (int r = 0; r < ref.n_rows; r++) {
        char name[256];
        snprintf(name, sizeof name, "%s.out", ref.rows[r][cn]);
        char **row = csv_find(&t, "tensor", name, "pass", "forward", NULL, NULL);
        if (!row)
            continue; /* folded, dropped (a view of nothing), or a cast to its own dtype */
        compared++;
        bool same = strcmp(row[td], ref.rows[r][cd]) == 0;
        *agree += same;
        cr_expect(same, "%s: %s, PyTorch's CUDA autocast gives %s", name, row[td],
                  ref.rows[r][cd]);
    }
    csv_free(&ref);
    csv_free(&t);
    return compared;
}

/* runs CASE (its name NAME) into DIR/res with --dump DIR/dump and the extra arguments */
static void run_case(const char *case_path, const char *dir, const char *extra)
{
    char cmd[4096], out[8192];
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s && %s run %s --device cpu --out %s/res --dump %s/dump --quiet %s 2>&1",
             dir, bin(), case_path, dir, dir, extra);
    cr_assert_eq(run_command(cmd, out, sizeof out), 0, "%s:\n%s", cmd, out);
}

/* the values and both autocast dtypes of an imported case against references */
static void check_imported(const char *case_path, const char *name, const char *values_csv,
                           const char *dtypes_fmt)
{
    char dir[256], path[1024], path2[1024];
    make_temp_dir(dir, sizeof dir);
    run_case(case_path, dir, "");
    snprintf(path, sizeof path, "%s/dump", dir);
    snprintf(path2, sizeof path2, "%s/res/%s/steps.csv", dir, name);
    errors err;
    compare_values(values_csv, path, path2, &err);
    cr_log_info("%s: loss %.2g, %d gradients largest %.2g relative", name, err.loss,
                err.n_tensors, err.grads);
    const char *kinds[] = {"float16", "bfloat16"};
    for (int k = 0; k < 2; k++) {
        char sub[512], extra[128], ref[1024];
        snprintf(sub, sizeof sub, "%s/%s", dir, kinds[k]);
        snprintf(extra, sizeof extra, "--set precision.autocast=%s --observe off", kinds[k]);
        run_case(case_path, sub, extra);
        snprintf(path, sizeof path, "%s/res/%s+precision.autocast=%s/tensors.csv", sub, name,
                 kinds[k]);
        snprintf(ref, sizeof ref, dtypes_fmt, kinds[k]);
        int agree, n = compare_dtypes(ref, path, &agree);
        cr_expect(n > 0, "no node of %s was compared", ref);
        cr_log_info("%s autocast %s: %d of %d node dtypes agree", name, kinds[k], agree, n);
    }
    rm_rf(dir);
}

Test(import, committed_mlp_residual_against_pytorch)
{
    check_imported("tests/imports/mlp_residual.case", "mlp_residual",
                   "tests/references/import/mlp_residual-values.csv",
                   "tests/references/import/mlp_residual-dtypes-%s.csv");
}

/* depthwise-separable convolutions with BatchNorm in training mode: conv2d groups=C */
Test(import, committed_dw_cnn_against_pytorch)
{
    check_imported("tests/imports/dw_cnn.case", "dw_cnn",
                   "tests/references/import/dw_cnn-values.csv",
                   "tests/references/import/dw_cnn-dtypes-%s.csv");
}

/* HF transformers' Llama (kv heads = heads): embedding, the hand-written RMSNorm with its
 * .to(float32) casts, rotary tables folded into constants, the causal bool mask as an additive
 * constant, sdpa, SwiGLU, a residual stream; cross_entropy over [B, T, V] logits */
Test(import, committed_llama_mha_against_pytorch)
{
    check_imported("tests/imports/llama_mha.case", "llama_mha",
                   "tests/references/import/llama_mha-values.csv",
                   "tests/references/import/llama_mha-dtypes-%s.csv");
}

/* the grads are named after the module's state_dict: no layer-named parameter is left */
Test(import, committed_mlp_residual_names_its_gradients_after_the_state_dict)
{
    char dir[256], path[1024];
    make_temp_dir(dir, sizeof dir);
    run_case("tests/imports/mlp_residual.case", dir, "--observe off");
    snprintf(path, sizeof path, "%s/res/mlp_residual/tensors.csv", dir);
    csv t;
    cr_assert(csv_read(path, &t));
    const char *want[] = {"blocks.0.fc1.weight.grad", "blocks.1.ln.bias.grad",
                          "head.weight.grad"};
    for (int k = 0; k < 3; k++)
        cr_expect(csv_find(&t, "tensor", want[k], NULL, NULL, NULL, NULL), "no row %s", want[k]);
    cr_expect(!csv_find(&t, "tensor", "linear.weight.grad", NULL, NULL, NULL, NULL));
    csv_free(&t);
    rm_rf(dir);
}

/* an export's dtype is baked into its graph: another params dtype is refused */
Test(import, another_params_dtype_than_the_export_is_refused)
{
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof cmd, "%s check tests/imports/mlp_residual.case "
             "--set precision.params=float16 2>&1", bin());
    cr_expect_eq(run_command(cmd, out, sizeof out), 2, "%s", out);
    cr_expect(strstr(out, "params = float16, but the graph was exported with float32 "
                          "parameters (export_params)") != NULL, "got: %s", out);
    cr_expect(strstr(out, "import the model again with --params float16") != NULL, "%s", out);
}

/* ---- the importer itself (needs torch) ---- */

/* runs `ampscope import ARGS` with the python that has torch; its output into out */
static int import_cli(const char *python, const char *args, char *out, size_t len)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "AMPSCOPE_PYTHON=%s %s import %s 2>&1", python, bin(), args);
    return run_command(cmd, out, len);
}

static bool dir_is_empty(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return true;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n == 0;
}

/* a script that fails, into an empty DIR: exit 2, `want` in the message, DIR still empty */
static void expect_refused(const char *script_text, const char *want)
{
    NEED_TORCH();
    char dir[256], script[512], args[1200], out[8192], res[600];
    make_temp_dir(dir, sizeof dir);
    write_file(dir, "bad.py", script_text, script, sizeof script);
    snprintf(res, sizeof res, "%s/out", dir);
    snprintf(args, sizeof args, "%s --out %s", script, res);
    cr_expect_eq(import_cli(torch_python(), args, out, sizeof out), 2, "%s", out);
    cr_expect(strstr(out, want) != NULL, "want '%s', got: %s", want, out);
    cr_expect(dir_is_empty(res), "the refused import wrote into %s", res);
    rm_rf(dir);
}

#define SCRIPT_HEAD "import torch\nimport torch.nn as nn\n"
#define SCRIPT_TAIL                                                                                \
    "def inputs():\n    return (torch.randn(2, 3, 8),)\n"                                         \
    "LOSS = 'mse'\ndef target():\n    return torch.randn(2, 3, 8)\n"

Test(import, refuses_a_script_without_model)
{
    expect_refused(SCRIPT_HEAD SCRIPT_TAIL, "defines no model()");
}

Test(import, refuses_ops_without_a_kind_listing_counts_and_first_module)
{
    expect_refused(SCRIPT_HEAD
                   "class A(nn.Module):\n"
                   "    def __init__(s):\n        super().__init__(); s.fc = nn.Linear(8, 8)\n"
                   "    def forward(s, x):\n"
                   "        y = torch.cumsum(s.fc(x), -1)\n"
                   "        return torch.cumsum(y, -1) + torch.atan(x)\n"
                   "class M(nn.Module):\n"
                   "    def __init__(s):\n        super().__init__(); s.a = A()\n"
                   "    def forward(s, x):\n        return s.a(x)\n"
                   "def model():\n    return M()\n" SCRIPT_TAIL,
                   "2 ops have no kind: aten.cumsum.default (2 nodes, first in a), "
                   "aten.atan.default (1 node, first in a)");
}

Test(import, refuses_an_export_that_fails_with_torchs_message)
{
    expect_refused(SCRIPT_HEAD
                   "class M(nn.Module):\n"
                   "    def forward(s, x):\n"
                   "        if x.sum() > 0:\n            return x\n        return -x\n"
                   "def model():\n    return M()\n" SCRIPT_TAIL,
                   "torch.export.export failed: ");
}

Test(import, refuses_a_forward_that_returns_no_tensor)
{
    expect_refused(SCRIPT_HEAD
                   "class M(nn.Module):\n"
                   "    def __init__(s):\n        super().__init__(); s.fc = nn.Linear(8, 8)\n"
                   "    def forward(s, x):\n        s.fc(x)\n        return (3,)\n"
                   "def model():\n    return M()\n" SCRIPT_TAIL,
                   "the forward returns no tensor");
}

/* HF's maybe_autocast asks torch.is_autocast_enabled(): traced with autocast off, its region
 * is not in the graph, and the case says where it was */
Test(import, warns_of_an_autocast_region_in_the_models_code)
{
    NEED_TORCH();
    char dir[256], script[512], args[1200], out[8192], path[600];
    make_temp_dir(dir, sizeof dir);
    write_file(dir, "ac.py",
               SCRIPT_HEAD "import contextlib\n"
               "def maybe_autocast(enabled):\n"
               "    return torch.autocast('cuda', enabled=enabled) if "
               "torch.is_autocast_enabled('cuda') else contextlib.nullcontext()\n"
               "class M(nn.Module):\n"
               "    def __init__(s):\n        super().__init__(); s.fc = nn.Linear(8, 8)\n"
               "    def forward(s, x):\n"
               "        with maybe_autocast(enabled=False):\n"
               "            y = s.fc(x)\n"
               "        return y * 2.0\n"
               "def model():\n    return M()\n" SCRIPT_TAIL,
               script, sizeof script);
    snprintf(args, sizeof args, "%s --out %s", script, dir);
    cr_assert_eq(import_cli(torch_python(), args, out, sizeof out), 0, "%s", out);
    snprintf(path, sizeof path, "cat %s/ac.case", dir);
    cr_assert_eq(run_command(path, out, sizeof out), 0, "no case written");
    cr_expect(strstr(out, "# WARNING: ac.py:10 `with maybe_autocast(enabled=False):`") != NULL,
              "got: %s", out);
    rm_rf(dir);
}

/* architectures that do not import yet say why (exit 2, nothing written) */
static void expect_script_refused(const char *name, const char *want)
{
    NEED_LIVE();
    char dir[256], args[1200], out[16384];
    make_temp_dir(dir, sizeof dir);
    snprintf(args, sizeof args, "tests/imports/%s.py --out %s/out", name, dir);
    cr_expect_eq(import_cli(torch_python(), args, out, sizeof out), 2, "%s", out);
    cr_expect(strstr(out, want) != NULL, "want '%s', got: %s", want, out);
    snprintf(args, sizeof args, "%s/out", dir);
    cr_expect(dir_is_empty(args), "the refused import wrote into %s", args);
    rm_rf(dir);
}

/* BERT's token type embedding reads ids made at import, not the input's */
Test(import_live, bert_tiny_is_refused_for_its_token_type_embedding, .timeout = 300)
{
    expect_script_refused("bert_tiny", "embedding_1: an embedding of ids other than the case's input");
}

/* a python without torch: the message says so, exit 2 */
Test(import, says_when_torch_cannot_be_imported)
{
    char out[4096];
    if (run_command("python3 -c 'import torch' >/dev/null 2>&1", out, sizeof out) == 0)
        cr_skip_test("python3 imports torch here: no python without it to run the importer");
    cr_expect_eq(import_cli("python3", "tests/imports/mlp_residual.py --out /nonexistent/x",
                            out, sizeof out),
                 2, "%s", out);
    cr_expect(strstr(out, "cannot import torch") != NULL, "got: %s", out);
}

/* skips the test while `ampscope ops` lists no layer kind KIND */
#define NEED_KIND(kind)                                                                            \
    do {                                                                                           \
        char out_[1 << 16], cmd_[512];                                                             \
        snprintf(cmd_, sizeof cmd_, "%s ops --json 2>&1", bin());                                  \
        run_command(cmd_, out_, sizeof out_);                                                      \
        if (!strstr(out_, "\"layer\": \"" kind "\""))                                           \
            cr_skip_test("the harness has no %s kind yet", kind);                                  \
    } while (0)

/* tests/imports/NAME.py imported afresh, its references computed by the installed PyTorch,
 * and the case checked against them as the committed ones are */
static void live_round_trip(const char *name)
{
    NEED_LIVE();
    char dir[256], args[1024], out[16384], cmd[2048], ref[600], path[600], fmt[1200];
    make_temp_dir(dir, sizeof dir);
    snprintf(args, sizeof args, "tests/imports/%s.py --out %s", name, dir);
    cr_assert_eq(import_cli(torch_python(), args, out, sizeof out), 0, "%s", out);
    snprintf(ref, sizeof ref, "%s/values.csv", dir);
    snprintf(cmd, sizeof cmd, "%s tools/import_reference.py values tests/imports/%s.py > %s",
             torch_python(), name, ref);
    cr_assert_eq(run_command(cmd, out, sizeof out), 0, "%s", out);
    for (int k = 0; k < 2; k++) {
        const char *dt = k ? "bfloat16" : "float16";
        snprintf(cmd, sizeof cmd, "%s tools/import_reference.py dtypes tests/imports/%s.py "
                 "--autocast %s > %s/dtypes-%s.csv 2>/dev/null",
                 torch_python(), name, dt, dir, dt);
        cr_assert_eq(run_command(cmd, out, sizeof out), 0, "%s", out);
    }
    snprintf(path, sizeof path, "%s/%s.case", dir, name);
    snprintf(fmt, sizeof fmt, "%s/dtypes-%%s.csv", dir);
    check_imported(path, name, ref, fmt);
    rm_rf(dir);
}

Test(import_live, mlp_residual, .timeout = 300) { live_round_trip("mlp_residual"); }
Test(import_live, dw_cnn, .timeout = 300) { live_round_trip("dw_cnn"); }
Test(import_live, llama_mha, .timeout = 300) { live_round_trip("llama_mha"); }
/* torchvision's mobilenet_v3_small: hard-swish, squeeze-excite, in-place ops, 156 nodes */
Test(import_live, mobilenet_v3, .timeout = 600) { live_round_trip("mobilenet_v3"); }
/* grouped-query attention: repeat_kv becomes repeat_interleave (skipped while the harness
 * has no such kind) */
Test(import_live, llama_tiny_gqa, .timeout = 300)
{
    NEED_KIND("repeat_interleave");
    live_round_trip("llama_tiny");
}
/* timm's ViT without a class token: the fused qkv split into three, layer_norm, sdpa, a
 * position table parameter, a mean-pooled head */
Test(import_live, vit_avg, .timeout = 300) { live_round_trip("vit_avg"); }
/* timm's ViT with its class token: cls_token.expand(B, -1, -1) gives a parameter, which has no
 * batch dim, the batch's size; no kind does that, and the import says so */
Test(import_live, vit_tiny_is_refused_for_its_class_token, .timeout = 300)
{
    expect_script_refused("vit_tiny", "expand of cls_token, which has no batch dim, to the batch's "
                                      "size");
}

/* params=: a module's prefix for a layer's tensors, a `parameter`'s whole name; [init] and
 * the .grad rows take those names (the values read from the files: a hand calculation) */
Test(import, params_option_names_tensors_as_the_state_dict)
{
    char dir[256], path[512], cmd[2048], out[8192];
    make_temp_dir(dir, sizeof dir);
    float twos[4] = {2, 2, 2, 2};
    int64_t shape[1] = {4};
    snprintf(path, sizeof path, "%s/s.npy", dir);
    cr_assert_eq(npy_write(path, DTYPE_FLOAT32, 1, shape, twos, NULL, 0), 0);
    write_file(dir, "p.case",
               "[model]\n"
               "w = parameter 4 init=ones params=scale\n"
               "fc = linear 4 -> 4 from=input params=enc.fc\n"
               "m = mul fc w\n"
               "[data]\nbatch = 2\nshape = 4\ntarget = randn\n"
               "[train]\nloss = mse\noptimizer = sgd lr=0\n"
               "[init]\nscale = file s.npy\n",
               path, sizeof path);
    snprintf(cmd, sizeof cmd, "%s run %s --device cpu --out %s/res --dump %s/dump --quiet 2>&1",
             bin(), path, dir, dir);
    cr_assert_eq(run_command(cmd, out, sizeof out), 0, "%s", out);
    snprintf(path, sizeof path, "%s/res/p/tensors.csv", dir);
    csv t;
    cr_assert(csv_read(path, &t));
    const char *want[] = {"scale.grad", "enc.fc.weight.grad", "enc.fc.bias.grad"};
    for (int k = 0; k < 3; k++)
        cr_expect(csv_find(&t, "tensor", want[k], NULL, NULL, NULL, NULL), "no row %s", want[k]);
    cr_expect(!csv_find(&t, "tensor", "w.weight", NULL, NULL, NULL, NULL));
    csv_free(&t);
    snprintf(path, sizeof path, "%s/dump/0/scale.npy", dir);
    npy_array a;
    cr_assert_eq(npy_read(path, &a, NULL, NULL, 0), 0, "no dump of scale");
    for (int i = 0; i < 4; i++)
        cr_expect_eq(((float *)a.data)[i], 2.0f, "scale[%d] was not read from its file", i);
    npy_free(&a);
    rm_rf(dir);
}
