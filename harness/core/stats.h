/*
 * stats.h: what one rounding did to a whole tensor: its counts (half.h's round_counts) and
 * the histogram of log2|x| of the values before the rounding. Every op of every backend
 * fills one of these for the tensor it writes, when it is given a non-NULL pointer; a NULL
 * round_stats means "not observed" and the op skips the bookkeeping.
 */
#ifndef AMPSCOPE_STATS_H
#define AMPSCOPE_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include "half.h"

typedef struct round_stats {
    int64_t numel;
    round_counts counts;
    int64_t hist[HIST_BINS];
    bool unseen; /* the values before the rounding were not seen (--gpu-math native): the
                    counts describe the stored tensor, underflow and overflow are unknown and
                    the histogram is of the stored values */
} round_stats;

#ifdef __cplusplus
extern "C" {
#endif

void round_stats_init(round_stats *s);
void round_stats_merge(round_stats *into, const round_stats *s);
/* Name of a histogram bin as hist.csv writes it: "-24", "zero", "inf", "nan". */
void hist_bin_name(int bin, char *buf, int len);
/* v as printf's "%.9g" writes (double)v, byte for byte, into buf (at least 32 bytes, NUL
 * ended); returns the length. Exact: the nine digits are those of the value's exact decimal
 * expansion rounded half to even, found with integer arithmetic. */
int float_text_g9(float v, char *buf);

#ifdef __cplusplus
}
#endif

#endif
