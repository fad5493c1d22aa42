/*
 * distributed.h: data parallel training over ranks, a case's [distributed] section.
 *
 * A case with `world_size = N` (N > 1) runs as N processes of bin/ampscope started by
 * mpirun (cli/launch.c: `ampscope run` starts it itself). Every rank starts from
 * rank 0's parameters (MPI_Bcast), draws its own data as the case with seed + rank would
 * (or takes rows rank, rank + N, ... of the [data] files: model_file_rows),
 * runs forward and backward, and its parameters' gradients are all-reduced by the engine
 * (MPI_Allreduce; distributed/mpi.c) under the case's communication policy
 * (distributed/policy.c): the dtype each gradient travels in, and where it is divided by
 * the world size. One all-reduce per parameter tensor, not DDP's 25 MiB buckets: every
 * policy rounds element by element, so a bucket gives the same values; only Open MPI's
 * choice of algorithm (by message size) could differ, and a case pins the algorithm.
 *
 * With accumulate > 1 the micro-batches accumulate locally and the all-reduce runs once, on
 * the accumulated .grad (DDP's no_sync; train.c). After every step the ranks agree on
 * whether a signal stops them (distributed_agree_signal), so that all stop after the same
 * step.
 *
 * Rank 0 keeps the results in its record: a tensor row `NAME.grad@allreduce` per parameter
 * per observed step, counted against the exact float64 mean of the ranks' gradients; its
 * relative error and SQNR (allreduce.csv); every rank's local gradient counts (ranks.csv).
 */
#ifndef AMPSCOPE_DISTRIBUTED_H
#define AMPSCOPE_DISTRIBUTED_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "config/case.h"
#include "core/dtype.h"

/* comm = ...: what PyTorch's wrapper does with a gradient around the all-reduce */
typedef enum comm_policy {
    COMM_DDP = 0,      /* reducer.cpp: grad * (1/world_size) into the bucket, then SUM */
    COMM_FP16_COMPRESS, /* default_hooks.py fp16_compress_hook */
    COMM_BF16_COMPRESS, /* default_hooks.py bf16_compress_hook */
    COMM_FSDP,          /* FSDP1 MixedPrecision(reduce_dtype): pre- and post-divide */
    COMM_FSDP2,         /* fully_shard: pre/post-divide for float16, else AVG */
    COMM_POLICY_COUNT
} comm_policy;

extern const char *const comm_policy_names[COMM_POLICY_COUNT];

/* What a policy does to one gradient: cast to `wire`, multiply by `premul` or divide by
 * `prediv` (1: not), SUM over the ranks in `wire`, divide by `postdiv`, cast back. */
typedef struct comm_plan {
    dtype wire;
    double premul;  /* DDP's 1/world_size, NCCL's AVG as PreMulSum; 1: none */
    double prediv;  /* FSDP's predivide factor; 1: none */
    double postdiv; /* FSDP's postdivide factor; 1: none */
} comm_plan;

/* FSDP's _get_gradient_predivide_factor: the largest power of two f with N % f == 0 and
 * N / f >= f... as PyTorch computes it */
double distributed_predivide_factor(int64_t world_size);
comm_plan distributed_plan(comm_policy p, dtype grad, dtype reduce_dtype, int64_t world_size);
/* One rank's contribution: g (values of .grad) rounded into plan->wire as the policy's
 * cast and division do. */
void distributed_contribution(const comm_plan *plan, const float *g, float *wire, int64_t n);
/* After the SUM: the post-division and the cast back into grad. */
void distributed_finish(const comm_plan *plan, dtype grad, float *v, int64_t n);
/* a + b in dtype dt, as c10's Half and BFloat16 add: in float, rounded once */
float distributed_add(float a, float b, dtype dt);

/* ---- the engine (distributed/mpi.c) ---- */
/* true when built with MPI (make MPI=0 builds without) */
bool distributed_have_mpi(void);
/* Open MPI's coll_tuned_allreduce_algorithm names, index = its number */
extern const char *const allreduce_algorithm_names[];
extern const int allreduce_algorithm_count;
/* This process is a rank of a distributed case (started by distributed_launch). */
bool distributed_is_rank(void);
int distributed_rank(void);
int distributed_world_size(void);
/* MPI_Init; the run's error text in err when it cannot */
int distributed_mpi_init(char *err, int len);
void distributed_mpi_finalize(void);
/* buf's bytes from rank 0 to every rank */
void distributed_bcast(void *buf, int64_t bytes);
/* in place, SUM of n values stored as dt (float32: MPI_FLOAT; half: the user op) */
void distributed_allreduce(void *buf, int64_t n, dtype dt);
/* in place, SUM of doubles (the float64 reference) */
void distributed_allreduce_f64(double *buf, int64_t n);
/* the largest of every rank's v, on every rank */
int distributed_max_int(int v);
/* rank 0 receives every rank's n int64s into all (n * world_size) */
void distributed_gather_i64(const int64_t *mine, int64_t *all, int n);
_Noreturn void distributed_abort(int code);

/* ---- NCCL, for ranks on the CUDA backend (distributed/nccl.c) ---- */
/* dlopens lib/libampscope_nccl.so beside the CUDA library and joins rank 0's communicator;
 * fewer GPUs than ranks is refused with the counts */
int distributed_nccl_open(char *err, int len);
bool distributed_nccl_active(void);
/* the all-reduce of buf (n values of dt) by ncclAllReduce; non-zero with err on failure */
int distributed_nccl_allreduce(void *buf, int64_t n, dtype dt, char *err, int len);
void distributed_nccl_close(void);

/* ---- the hooks the trainer calls (distributed.c) ---- */
struct run;
struct tensor;
/* after the model's parameters are made: rank 0's values to every rank */
void distributed_broadcast_params(struct run *r, struct tensor *const *params, int n);
/* after backward: every parameter's .grad all-reduced under the case's policy, observed */
void distributed_reduce_grads(struct run *r, struct tensor *const *params, int n);
/* after a step: the signal that stops the run, as every rank agrees (the largest of the
 * ranks' sig; 0: none), so that all ranks stop after the same step; sig outside a rank */
int distributed_agree_signal(int sig);

/* ---- the rank's side and the launcher (cli/launch.c) ---- */
struct backend;
struct train_options;
struct run_record;
/* A rank's run of cfg (the process mpirun started): rank 0 writes into the folder the
 * launcher named; a failure on any rank ends all of them. Returns the exit status. */
int distributed_rank_main(case_config *cfg, struct backend *be, const struct train_options *opt);
/* `ampscope run`'s side: runs cfg over cfg->world_size ranks with mpirun, the ranks'
 * command line being argv (run CASE and its options, without the program), into dir;
 * fills rec with rank 0's record (its files, read back, and its result). Returns non-zero
 * (message in rec->result.error) when no result. */
int distributed_train_case(const case_config *cfg, const char *const *argv, int argc,
                           const char *dir, struct run_record *rec);

/* ---- the case's section (case/distributed.c) ---- */
void distributed_write_json(const case_config *cfg, FILE *f);

#endif
