/* stats.c: initialising, merging and naming round_stats (see stats.h). */
#include "stats.h"

#include <stdio.h>
#include <string.h>

void round_stats_init(round_stats *s)
{
    memset(s, 0, sizeof *s);
    round_counts_init(&s->counts);
}

void round_stats_merge(round_stats *into, const round_stats *s)
{
    into->numel += s->numel;
    into->unseen |= s->unseen;
    round_counts_merge(&into->counts, &s->counts);
    for (int i = 0; i < HIST_BINS; i++)
        into->hist[i] += s->hist[i];
}

void hist_bin_name(int bin, char *buf, int len)
{
    if (bin == HIST_ZERO)
        snprintf(buf, (size_t)len, "zero");
    else if (bin == HIST_INF)
        snprintf(buf, (size_t)len, "inf");
    else if (bin == HIST_NAN)
        snprintf(buf, (size_t)len, "nan");
    else if (len >= 5) { /* an exponent in [-149, 127], written without snprintf (hist.csv's
                          * rows are written for every bin of every observed tensor) */
        int e = bin + HIST_MIN_EXP, n = 0;
        unsigned u = e < 0 ? (unsigned)-e : (unsigned)e;
        if (e < 0)
            buf[n++] = '-';
        if (u >= 100)
            buf[n++] = (char)('0' + u / 100);
        if (u >= 10)
            buf[n++] = (char)('0' + u / 10 % 10);
        buf[n++] = (char)('0' + u % 10);
        buf[n] = '\0';
    } else
        snprintf(buf, (size_t)len, "%d", bin + HIST_MIN_EXP);
}

/*
 * float_text_g9: the nine significant digits D (10^8 <= D < 10^9) of |v| at decimal exponent
 * x, |v| ~ D * 10^(x - 8), rounded half to even as glibc's printf rounds the exact value.
 * |v| = m * 2^e exactly (m < 2^24). For x - 8 >= 0 (|v| >= 10^8, so e > 0) D = m 2^e / 10^p
 * in 128-bit integers; otherwise D = m 2^e 10^q (q = 8 - x), computed as m 5^q shifted by
 * q + e bits: m 5^q < 2^148 is held in a 128-bit high part and a 64-bit low part.
 */
typedef unsigned __int128 u128;

static u128 pow_u128(unsigned base, int n)
{
    u128 r = 1;
    while (n-- > 0)
        r *= base;
    return r;
}

/* round half to even of t / 2 where t holds the quotient's last bit beside it: t = 2D + h
 * with h the half bit, sticky whether anything below was non-zero */
static uint64_t round_half_even(u128 t, bool sticky)
{
    uint64_t d = (uint64_t)(t >> 1);
    bool half = t & 1;
    return d + (half && (sticky || (d & 1)));
}

static uint64_t digits_at(uint32_t m, int e, int x)
{
    int p = x - 8;
    if (p >= 0) { /* e > 0 here: m 2^e >= 10^8 with m < 2^24 */
        u128 n = (u128)m << e, den = pow_u128(10, p), d = n / den, r = n % den;
        return (uint64_t)d + (2 * r > den || (2 * r == den && (d & 1)));
    }
    int q = -p;
    if (e >= 0) /* an integer times 10^q: exact */
        return (uint64_t)(((u128)m << e) * pow_u128(10, q));
    u128 p5 = pow_u128(5, q); /* q <= 53: 5^53 < 2^124 */
    u128 lo = (u128)m * (uint64_t)p5, hi = (u128)m * (uint64_t)(p5 >> 64);
    u128 n_hi = hi + (lo >> 64); /* m 5^q = n_hi 2^64 + n_lo */
    uint64_t n_lo = (uint64_t)lo;
    int shift = q + e; /* D = m 5^q 2^shift */
    if (shift >= 0)
        return (uint64_t)(((n_hi << 64) | n_lo) << shift);
    int t = -shift - 1; /* t = m 5^q / 2^t: D's bits and the half bit */
    u128 top;
    bool sticky;
    if (t >= 64) {
        top = n_hi >> (t - 64);
        sticky = (n_hi & (((u128)1 << (t - 64)) - 1)) != 0 || n_lo != 0;
    } else if (t > 0) {
        top = (n_hi << (64 - t)) | (n_lo >> t);
        sticky = (n_lo & ((1ull << t) - 1)) != 0;
    } else {
        top = (n_hi << 64) | n_lo;
        sticky = false;
    }
    return round_half_even(top, sticky);
}

int float_text_g9(float v, char *buf)
{
    uint32_t bits = float_bits(v), a = bits & 0x7fffffffu;
    if (a == 0 || a >= 0x7f800000u) /* zeros, infinities and NaNs as printf writes them */
        return snprintf(buf, 32, "%.9g", (double)v);
    uint32_t m = a >> 23 ? (a & 0x7fffffu) | 0x800000u : a;
    int e = a >> 23 ? (int)(a >> 23) - 150 : -149;
    int log2 = e + 31 - __builtin_clz(m); /* floor(log2 |v|) */
    int x = (log2 * 78913) >> 18;         /* floor(log2 * log10(2)): x or x - 1 */
    if (log2 < 0)
        x = -((-log2 * 78913 + (1 << 18) - 1) >> 18);
    uint64_t d = digits_at(m, e, x);
    for (int k = 0; k < 3 && (d >= 1000000000u || d < 100000000u); k++) {
        x += d >= 1000000000u ? 1 : -1;
        d = digits_at(m, e, x);
    }
    char dig[9];
    for (int i = 8; i >= 0; i--, d /= 10)
        dig[i] = (char)('0' + d % 10);
    int nd = 9; /* the digits left once trailing zeros go */
    while (nd > 1 && dig[nd - 1] == '0')
        nd--;
    int n = 0;
    if (bits >> 31)
        buf[n++] = '-';
    if (x < -4 || x >= 9) { /* %e: d.dddde+XX */
        buf[n++] = dig[0];
        if (nd > 1) {
            buf[n++] = '.';
            memcpy(buf + n, dig + 1, (size_t)(nd - 1)), n += nd - 1;
        }
        buf[n++] = 'e';
        buf[n++] = x < 0 ? '-' : '+';
        int ax = x < 0 ? -x : x;
        if (ax >= 100)
            buf[n++] = (char)('0' + ax / 100);
        buf[n++] = (char)('0' + ax / 10 % 10);
        buf[n++] = (char)('0' + ax % 10);
    } else if (x >= 0) { /* %f with 8 - x decimals */
        memcpy(buf + n, dig, (size_t)(x + 1)), n += x + 1;
        if (nd > x + 1) {
            buf[n++] = '.';
            memcpy(buf + n, dig + x + 1, (size_t)(nd - x - 1)), n += nd - x - 1;
        }
    } else { /* 0.000ddd */
        buf[n++] = '0';
        buf[n++] = '.';
        for (int i = 0; i < -x - 1; i++)
            buf[n++] = '0';
        memcpy(buf + n, dig, (size_t)nd), n += nd;
    }
    buf[n] = '\0';
    return n;
}
