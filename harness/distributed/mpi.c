/*
 * distributed/mpi.c: the engine the gradients are reduced by: Open MPI (distributed.h).
 * float32 travels as MPI_FLOAT with MPI_SUM; float16 and bfloat16 as a 2-byte datatype of
 * their own with a user-defined op that adds each pair in that dtype, rounding every
 * pairwise sum (distributed_add), in whatever order Open MPI's algorithm combines the ranks
 * (the op is declared commutative, as a sum is; a case pins the algorithm to repeat it).
 * MPI calls keep MPI's default error handler, MPI_ERRORS_ARE_FATAL: an MPI error ends
 * every rank with Open MPI's message. Built without MPI (make MPI=0), the calls below are
 * never reached: the launcher refuses a distributed case first.
 */
#include "distributed.h"

#include <stdlib.h>

#include "core/half.h"

/* coll_tuned_allreduce_algorithm's values (ompi/mca/coll/tuned/coll_tuned_allreduce_decision.c) */
const char *const allreduce_algorithm_names[] = {"default",   "basic_linear",   "nonoverlapping",
                                                 "recursive_doubling", "ring", "segmented_ring",
                                                 "rabenseifner"};
const int allreduce_algorithm_count =
    (int)(sizeof allreduce_algorithm_names / sizeof allreduce_algorithm_names[0]);

bool distributed_is_rank(void) { return getenv("AMPSCOPE_RANK") != NULL; }

#ifdef AMPSCOPE_MPI
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static MPI_Datatype half_type[DTYPE_COUNT];
static MPI_Op half_sum[DTYPE_COUNT];

/* MPI_User_function: inout[i] = in[i] + inout[i], rounded into the dtype */
static void sum_as(void *in, void *inout, const int *len, dtype dt)
{
    for (int i = 0; i < *len; i++) {
        float a = load_as_float(in, dt, i), b = load_as_float(inout, dt, i);
        store_from_float(inout, dt, i, distributed_add(a, b, dt));
    }
}
static void sum_float16(void *in, void *inout, int *len, MPI_Datatype *t)
{
    sum_as(in, inout, len, DTYPE_FLOAT16);
}
static void sum_bfloat16(void *in, void *inout, int *len, MPI_Datatype *t)
{
    sum_as(in, inout, len, DTYPE_BFLOAT16);
}

bool distributed_have_mpi(void) { return true; }

int distributed_rank(void)
{
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

int distributed_world_size(void)
{
    int n = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
}

int distributed_mpi_init(char *err, int len)
{
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
        snprintf(err, (size_t)len, "MPI_Init failed");
        return -1;
    }
    static const dtype halves[] = {DTYPE_FLOAT16, DTYPE_BFLOAT16};
    static MPI_User_function *const fns[] = {sum_float16, sum_bfloat16};
    for (int i = 0; i < 2; i++) {
        MPI_Type_contiguous(2, MPI_BYTE, &half_type[halves[i]]);
        MPI_Type_commit(&half_type[halves[i]]);
        MPI_Op_create(fns[i], 1, &half_sum[halves[i]]);
    }
    return 0;
}

void distributed_mpi_finalize(void)
{
    static const dtype halves[] = {DTYPE_FLOAT16, DTYPE_BFLOAT16};
    for (int i = 0; i < 2; i++) {
        MPI_Op_free(&half_sum[halves[i]]);
        MPI_Type_free(&half_type[halves[i]]);
    }
    MPI_Finalize();
}

/* counts over INT_MAX go in pieces */
#define MPI_PIECE ((int64_t)1 << 30)

void distributed_bcast(void *buf, int64_t bytes)
{
    for (int64_t off = 0; off < bytes; off += MPI_PIECE) {
        int64_t m = bytes - off < MPI_PIECE ? bytes - off : MPI_PIECE;
        MPI_Bcast((char *)buf + off, (int)m, MPI_BYTE, 0, MPI_COMM_WORLD);
    }
}

void distributed_allreduce(void *buf, int64_t n, dtype dt)
{
    MPI_Datatype t = dt == DTYPE_FLOAT32 ? MPI_FLOAT : half_type[dt];
    MPI_Op op = dt == DTYPE_FLOAT32 ? MPI_SUM : half_sum[dt];
    size_t size = dtype_size(dt);
    for (int64_t off = 0; off < n; off += MPI_PIECE) {
        int64_t m = n - off < MPI_PIECE ? n - off : MPI_PIECE;
        MPI_Allreduce(MPI_IN_PLACE, (char *)buf + (size_t)off * size, (int)m, t, op,
                      MPI_COMM_WORLD);
    }
}

void distributed_allreduce_f64(double *buf, int64_t n)
{
    for (int64_t off = 0; off < n; off += MPI_PIECE) {
        int64_t m = n - off < MPI_PIECE ? n - off : MPI_PIECE;
        MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)m, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
}

int distributed_max_int(int v)
{
    MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return v;
}

void distributed_gather_i64(const int64_t *mine, int64_t *all, int n)
{
    MPI_Gather(mine, n, MPI_INT64_T, all, n, MPI_INT64_T, 0, MPI_COMM_WORLD);
}

_Noreturn void distributed_abort(int code)
{
    fflush(NULL);
    MPI_Abort(MPI_COMM_WORLD, code);
    exit(code); /* MPI_Abort does not return; the compiler does not know */
}

#else /* built without MPI: one process, rank 0 of 1 */

#include <stdio.h>

bool distributed_have_mpi(void) { return false; }
int distributed_rank(void) { return 0; }
int distributed_world_size(void) { return 1; }
int distributed_mpi_init(char *err, int len)
{
    snprintf(err, (size_t)len, "this ampscope was built without MPI (make MPI=0)");
    return -1;
}
void distributed_mpi_finalize(void) {}
void distributed_bcast(void *buf, int64_t bytes) {}
void distributed_allreduce(void *buf, int64_t n, dtype dt) {}
void distributed_allreduce_f64(double *buf, int64_t n) {}
int distributed_max_int(int v) { return v; }
void distributed_gather_i64(const int64_t *mine, int64_t *all, int n)
{
    for (int i = 0; i < n; i++)
        all[i] = mine[i];
}
_Noreturn void distributed_abort(int code) { exit(code); }

#endif
