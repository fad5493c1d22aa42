/*
 * test_observe_rows.c: results/write.c writes tensors.csv and hist.csv rows by hand (a line
 * buffer, integers without printf) from the rows the observer put in the run's record;
 * every byte must be what the format strings
 * "%s,%lld,%s,%d,%s,%s,%s,%s,%lld,%lld" + ",%lld,%s,%lld,%s,%lld,%.9g,%.9g" + ",%s,%s,%s"
 * and "%s,%lld,%s,%s,%s,%lld" print, which this test writes with snprintf for the same
 * tensor: large counts, unseen counts, no amin (+inf), no stats, every bin name, the reason
 * columns, and a row longer than the line buffer.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/observe.h"
#include "results/write.h"
/* the whole contents of f */
static char *slurp(FILE *f)
{
    long n = ftell(f);
    char *s = calloc((size_t)n + 1, 1);
    rewind(f);
    cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    return s;
}

/* the rows as fprintf writes them: tensors.csv's into t, hist.csv's into h */
static void expected_rows(const char *case_name, const observer *o, const tensor *tt,
                          const char *role, const round_stats *st, char *t, size_t tlen, char *h,
                          size_t hlen)
{
    char shape[96];
    tensor_shape_str(tt, shape, sizeof shape);
    int n = snprintf(t, tlen, "%s,%lld,%s,%d,%s,%s,%s,%s,%lld,%lld", case_name, (long long)o->step,
                     pass_name(o->pass), o->order, tt->name, role, dtype_name(tt->dtype), shape,
                     (long long)tt->numel, (long long)tensor_bytes(tt));
    const char *why = dtype_reason_name(tt->why.reason), *op = tt->why.op ? tt->why.op : "";
    h[0] = '\0';
    if (!st) {
        snprintf(t + n, tlen - (size_t)n, ",,,,,,,,%s,%s,%s\n", why, op, tt->why.from);
        return;
    }
    const round_counts *c = &st->counts;
    char under[24] = "", over[24] = "", amin[32] = "";
    if (!st->unseen) {
        snprintf(under, sizeof under, "%lld", (long long)c->underflow);
        snprintf(over, sizeof over, "%lld", (long long)c->overflow);
    }
    if (c->amin_nonzero != bits_float(0x7f800000u))
        snprintf(amin, sizeof amin, "%.9g", (double)c->amin_nonzero);
    snprintf(t + n, tlen - (size_t)n, ",%lld,%s,%lld,%s,%lld,%.9g,%s,%s,%s,%s\n",
             (long long)c->zeros, under, (long long)c->subnormal, over, (long long)c->nan,
             (double)c->amax, amin, why, op, tt->why.from);
    size_t off = 0;
    for (int b = 0; b < HIST_BINS; b++) {
        if (!st->hist[b])
            continue;
        char bin[16];
        if (b == HIST_ZERO || b == HIST_INF || b == HIST_NAN)
            snprintf(bin, sizeof bin, "%s",
                     b == HIST_ZERO  ? "zero"
                     : b == HIST_INF ? "inf"
                                     : "nan");
        else
            snprintf(bin, sizeof bin, "%d", b + HIST_MIN_EXP);
        off += (size_t)snprintf(h + off, hlen - off, "%s,%lld,%s,%s,%s,%lld\n", case_name,
                                (long long)o->step, pass_name(o->pass), tt->name, bin,
                                (long long)st->hist[b]);
    }
}

/* a tensor's reason: made from two operands whose names fill the field */
static void long_reason(tensor *t)
{
    tensor a = {0}, b = {0};
    memset(a.name, 'a', TENSOR_NAME_MAX - 1);
    memset(b.name, 'b', TENSOR_NAME_MAX - 1);
    const tensor *from[2] = {&a, &b};
    tensor_why(t, DTYPE_REASON_PROMOTE, "add", from, 2);
}

static void check_rows_of(const char *case_name, const round_stats *st, bool unseen, int ndim,
                          const int64_t *shape, bool long_row);

static void check_rows(const char *case_name, const round_stats *st, bool unseen)
{
    int64_t shape[] = {16000, 1024};
    check_rows_of(case_name, st, unseen, 2, shape, false);
}

static void check_rows_of(const char *case_name, const round_stats *st, bool unseen, int ndim,
                          const int64_t *shape, bool long_row)
{
    FILE *tf = tmpfile(), *hf = tmpfile();
    cr_assert(tf && hf);
    run_record *rec = record_new();
    cr_assert_not_null(rec);
    snprintf(rec->config.name, sizeof rec->config.name, "%s", case_name);
    observer o = {.rec = rec};
    observe_begin_step(&o, 123456789012LL, true);
    observe_begin_pass(&o, PASS_BACKWARD);
    tensor t = {.name = "fc1.weight.grad", .dtype = DTYPE_FLOAT16, .ndim = ndim};
    if (ndim)
        memcpy(t.shape, shape, sizeof(int64_t) * (size_t)ndim);
    t.numel = shape_numel(ndim, shape);
    const tensor *of = &t;
    tensor_why(&t, DTYPE_REASON_GRAD, "linear", &of, 1);
    if (long_row) {
        memset(t.name, 'n', TENSOR_NAME_MAX - 1);
        long_reason(&t);
    }
    round_stats s;
    if (st) {
        s = *st;
        s.unseen = unseen;
    }
    observe_tensor(&o, &t, ROLE_GRAD_PARAM, st ? &s : NULL);
    cr_assert_eq(results_write_tensor_rows(tf, hf, rec), 0);
    size_t tlen = strlen(case_name) + 8192, hlen = (strlen(case_name) + 512) * HIST_BINS;
    char *et = malloc(tlen), *eh = malloc(hlen), *gt = slurp(tf), *gh = slurp(hf);
    expected_rows(case_name, &o, &t, "grad_param", st ? &s : NULL, et, tlen, eh, hlen);
    cr_expect_str_eq(gt, et);
    cr_expect_str_eq(gh, eh);
    cr_expect(!rec->out_of_memory);
    free(et), free(eh), free(gt), free(gh);
    fclose(tf), fclose(hf);
    record_free(rec);
}

/* stats with every bin filled (counts from 1 to beyond 2^32) and awkward floats */
static round_stats full_stats(float amin)
{
    round_stats st;
    round_stats_init(&st);
    st.counts = (round_counts){.zeros = 9223372036854775807LL,
                               .underflow = 0,
                               .subnormal = 4294967296LL,
                               .overflow = 7,
                               .nan = 1000000000000LL,
                               .amax = 65504.0f,
                               .amin_nonzero = amin};
    for (int b = 0; b < HIST_BINS; b++)
        st.hist[b] = (int64_t)b * b * b * 1000003LL + 1;
    return st;
}

Test(observe_rows, rows_are_the_bytes_fprintf_writes)
{
    round_stats st = full_stats(5.96046448e-08f);
    check_rows("small-autocast", &st, false);
    check_rows("small-autocast", &st, true);  /* --gpu-math native: underflow, overflow empty */
    st = full_stats(bits_float(0x7f800000u)); /* no non-zero value: amin empty */
    st.counts.amax = 0.100000001f;
    check_rows("c", &st, false);
    check_rows("no-stats", NULL, false);
}

Test(observe_rows, a_row_longer_than_the_line_buffer)
{
    char name[CASE_NAME_MAX + 512]; /* the longest case name, tensor name and reason */
    memset(name, 'q', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    round_stats st = full_stats(1.40129846e-45f);
    int64_t shape[] = {16000, 1024};
    check_rows_of(name, &st, false, 2, shape, true);
    check_rows_of(name, NULL, false, 2, shape, true);
}

Test(observe_rows, shapes_as_tensor_shape_str_writes_them)
{
    round_stats st = full_stats(0.5f);
    check_rows_of("c", &st, false, 0, NULL, false); /* "scalar" */
    int64_t one[] = {7};
    check_rows_of("c", &st, false, 1, one, false);
    /* six dims, the most a tensor has */
    int64_t big[TENSOR_MAX_DIMS] = {1234567, 89012, 3456, 7, 3, 5};
    check_rows_of("c", &st, false, TENSOR_MAX_DIMS, big, false);
    char name[300]; /* hist rows over several of the writer's buffers */
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    check_rows_of(name, &st, false, 1, one, false);
}

/* float_text_g9 against snprintf's "%.9g" on n patterns; the count that differ */
static int64_t g9_mismatches(const uint32_t *patterns, int64_t n)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        float f = bits_float(patterns[i]);
        char want[64], got[64];
        snprintf(want, sizeof want, "%.9g", (double)f);
        int len = float_text_g9(f, got);
        if (strcmp(want, got) != 0 || len != (int)strlen(want)) {
            if (bad < 5)
                cr_log_error("%08x: %%.9g writes %s, float_text_g9 %s", patterns[i], want, got);
            bad++;
        }
    }
    return bad;
}

Test(observe_rows, floats_are_written_as_printf_writes_them)
{
    enum { N = 1 << 20 };
    uint32_t *p = malloc(sizeof *p * N);
    cr_assert_not_null(p);
    int64_t n = 0;
    for (uint64_t b = 0; b < (1ull << 32) && n < N / 2; b += 8191) /* every sign and exponent */
        p[n++] = (uint32_t)b;
    /* mantissas of at most 10 bits, in every binade: short exact decimal expansions, among
     * them the ties at the tenth digit (513 / 1024 = 0.5009765625) */
    for (uint32_t ex = 0; ex < 255; ex++)
        for (uint32_t top = 0; top < 1024 && n < N; top += 3)
            p[n++] = ex << 23 | top << 13;
    static const uint32_t edges[] = {0x00000001, 0x007fffff, 0x00800000, 0x3f800000, 0x3f7fffff,
                                     0x4cbebc20, 0x4cbebc1f, 0x4e6e6b28, 0x7f7fffff, 0x80000000,
                                     0x00000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xbf800001,
                                     0x3dcccccd, 0x33d6bf95, 0x0da24260, 0x501502f9};
    for (size_t i = 0; i < sizeof edges / sizeof *edges; i++)
        p[n++] = edges[i];
    cr_expect_eq(g9_mismatches(p, n), 0);
    free(p);
}
