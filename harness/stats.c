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
