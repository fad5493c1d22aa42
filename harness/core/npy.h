/*
 * npy.h: reading and writing NumPy .npy files.
 *
 * Read (npy_read on a path, npy_parse on a memory buffer; format versions 1.0, 2.0, 3.0):
 *   '<f4' -> float32, '<f2' -> float16 (kept as its bit patterns, as half.h stores it),
 *   '<i8' -> int64 (class labels), '<f8' -> float32 rounded to nearest, ties to even (NaN
 *   stays NaN, quiet, payload's top bits kept). The byte-order marker may also be '=' or '|'
 *   (both mean native, which is little-endian here). Everything else is refused: other
 *   descrs ('>f4', '<i4', '|O', ...), structured dtypes, fortran_order True, more than
 *   NPY_MAX_DIMS dims, shapes whose size in bytes overflows int64 (numpy refuses those
 *   too). The header dict must hold exactly the keys 'descr', 'fortran_order' and 'shape'
 *   (in any order, once each), and the data must be exactly numel * itemsize bytes. Both
 *   functions validate all of the input and never read past it, so npy_parse is the entry
 *   point for fuzzing.
 *
 * Write (npy_write): format 1.0, descr '<f4', '<f2' or '<i8', C order; the header is laid
 *   out byte for byte as numpy.save lays it out (data starts at a multiple of 64 bytes).
 *   bfloat16 has no .npy descr: convert it to float32 (exact) first.
 *
 * Errors: functions return 0 on success and -1 on failure, with a one-line message in err
 * (err may be NULL or errlen 0 to discard it). npy_read's and npy_write's messages start
 * with the path ("w1.npy: truncated data: expected 4096 bytes, found 100"); npy_parse's
 * messages are the same without the path.
 */
#ifndef AMPSCOPE_NPY_H
#define AMPSCOPE_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "half.h"

#define NPY_MAX_DIMS 8

typedef struct npy_array {
    dtype dt;                    /* DTYPE_FLOAT32, DTYPE_FLOAT16 or DTYPE_INT64, in memory */
    int ndim;                    /* 0..NPY_MAX_DIMS; 0 is a scalar with numel 1 */
    int64_t shape[NPY_MAX_DIMS]; /* entries past ndim are 0 */
    int64_t numel;
    void *data;         /* malloc'd (non-NULL even when numel is 0), C order */
    int64_t f8_inexact; /* '<f8' only: values float32 does not hold exactly,
                           overflows and underflows included, NaNs not; else 0 */
} npy_array;

/* Parses a whole .npy file held in buf[0..len). On success fills *out (free it with
 * npy_free) and, for '<f8' when f8_counts is non-NULL, adds the float64 -> float32
 * roundings into *f8_counts (round_tally's classes with float32's min normal; the caller
 * initialises it with round_counts_init). On failure *out is zeroed and *f8_counts is
 * untouched. */
int npy_parse(const uint8_t *buf, size_t len, npy_array *out, round_counts *f8_counts, char *err,
              int errlen);

/* Reads the file at path and parses it with npy_parse. */
int npy_read(const char *path, npy_array *out, round_counts *f8_counts, char *err, int errlen);

/* Frees a->data and zeroes *a; safe on a zeroed or already freed array. */
void npy_free(npy_array *a);

/* Writes data (numel elements of dt, C order) to path, replacing the file. dt must be
 * DTYPE_FLOAT32, DTYPE_FLOAT16 or DTYPE_INT64; ndim 0..NPY_MAX_DIMS; shape entries >= 0,
 * their product (zeros left out, as numpy does) times the item size within INT64_MAX; data
 * may be NULL only when numel is 0. A failure part way leaves a partial file. */
int npy_write(const char *path, dtype dt, int ndim, const int64_t *shape, const void *data,
              char *err, int errlen);

#endif
