/*
 * fuzz_npy.c: libFuzzer target for the .npy reader: npy_parse on the raw bytes must either
 * accept them (and then its array must be consistent: numel elements of its dtype) or
 * refuse them with a message, never read past the buffer. Build and run: make fuzz.
 */
#include <stdint.h>
#include <stdlib.h>

#include "core/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    npy_array a;
    round_counts counts;
    round_counts_init(&counts);
    char err[256];
    if (npy_parse(data, size, &a, &counts, err, sizeof err) == 0) {
        int64_t n = 1;
        for (int i = 0; i < a.ndim; i++)
            n *= a.shape[i];
        if (n != a.numel)
            abort();
        volatile uint8_t sink = 0;
        size_t bytes = (size_t)a.numel * dtype_size(a.dt);
        for (size_t i = 0; i < bytes; i++) /* every byte of the array is readable */
            sink ^= ((const uint8_t *)a.data)[i];
        (void)sink;
        npy_free(&a);
    }
    return 0;
}
