/*
 * case/distributed.c: a case's [distributed] section (distributed.h), read into the
 * case_config, and its part of `ampscope check --json`.
 *   world_size = N                  ranks (default 1: one process, no section needed)
 *   comm = ddp | fp16_compress | bf16_compress | fsdp reduce_dtype=D | fsdp2 reduce_dtype=D
 *   allreduce_algorithm = default | basic_linear | nonoverlapping | recursive_doubling |
 *                         ring | segmented_ring | rabenseifner   (Open MPI's, pinned)
 *   hosts = FILE                    an Open MPI hostfile (relative to the case file), read by
 *                                   the launcher; a rank, which never reads it, takes the path
 *                                   as written (its host need not have the file)
 * With accumulate = A > 1, each rank accumulates its A micro-batches locally and the
 * gradients are all-reduced once, after the last (DDP's no_sync), and a data file holds
 * A x world_size x batch samples (case/check.c, model_file_rows).
 */
#include "parse.h"
#include "distributed/distributed.h"

#include <stdlib.h>
#include <string.h>

#define MAX_WORLD_SIZE 64

static void key_world_size(parse_ctx *c, entry *e)
{
    if (parse_int(c, e, e->value, "world_size", 1, &c->cfg->world_size) &&
        c->cfg->world_size > MAX_WORLD_SIZE)
        err_at(c, e, "world_size = %lld: at most %d ranks", (long long)c->cfg->world_size,
               MAX_WORLD_SIZE);
}

static void key_comm(parse_ctx *c, entry *e)
{
    words t;
    if (!split_words(c, e, &t))
        return;
    int p = parse_choice(c, e, t.w[0], "comm", comm_policy_names, COMM_POLICY_COUNT);
    bool fsdp = p == COMM_FSDP || p == COMM_FSDP2;
    static const char *const opts[] = {"reduce_dtype"};
    const char *vals[1] = {NULL};
    if (p >= 0 && parse_options(c, e, &t, 1, comm_policy_names[p], opts, fsdp ? 1 : 0, vals)) {
        c->cfg->comm = p;
        if (fsdp && !vals[0]) {
            err_at(c, e, "comm = %s needs reduce_dtype=float16|bfloat16|float32", t.w[0]);
        } else if (fsdp) {
            dtype dt;
            if (!dtype_parse(vals[0], &dt) || dt == DTYPE_INT64 || dtype_is_float8(dt))
                err_at(c, e, "bad value '%s' for reduce_dtype: expected float16, bfloat16 or "
                             "float32", vals[0]);
            else
                c->cfg->reduce_dtype = dt;
        }
    }
    free(t.buf);
}

static void key_algorithm(parse_ctx *c, entry *e)
{
    int a = parse_choice(c, e, e->value, "allreduce_algorithm", allreduce_algorithm_names,
                         allreduce_algorithm_count);
    if (a >= 0)
        c->cfg->allreduce_algorithm = a;
}

static void key_hosts(parse_ctx *c, entry *e)
{
    if (!distributed_is_rank())
        parse_path(c, e, c->cfg->hosts);
    else
        snprintf(c->cfg->hosts, sizeof c->cfg->hosts, "%s", e->value);
}

void parse_distributed_section(parse_ctx *c)
{
    static const char *const names[] = {"world_size", "comm", "allreduce_algorithm", "hosts"};
    static void (*const fns[])(parse_ctx *, entry *) = {key_world_size, key_comm, key_algorithm,
                                                        key_hosts};
    c->cfg->world_size = 1;
    c->cfg->comm = COMM_DDP;
    c->cfg->reduce_dtype = DTYPE_FLOAT32;
    for (int i = 0; i < c->n_entries; i++) {
        entry *e = &c->entries[i];
        if (e->sec != SEC_DISTRIBUTED)
            continue;
        int k = find_name(names, 4, e->key);
        if (k < 0) {
            char *h = hint(e->key, names, 4, "allowed keys");
            err_at(c, e, "unknown key '%s' in [distributed]; %s", e->key, h);
            free(h);
        } else if (need_value(c, e)) {
            fns[k](c, e);
        }
    }
    entry *e = find_entry(c, SEC_DISTRIBUTED, "world_size");
    const case_config *cfg = c->cfg;
    if (!e || cfg->world_size == 1 || cfg->accumulate <= 1)
        return;
    /* DDP reduces the model's .grad; Apex O2 unscales each micro-batch's into the masters */
    if (cfg->master_weights && !cfg->delay_unscale)
        err_at(c, e, "world_size > 1 with [train] accumulate > 1 and master weights needs "
                     "delay_unscale = yes: DDP all-reduces the model's accumulated .grad, not "
                     "the float32 masters each micro-batch is unscaled into");
}

void distributed_write_json(const case_config *cfg, FILE *f)
{
    if (cfg->world_size == 1)
        return;
    fprintf(f, "  \"distributed\": {\"world_size\": %lld, \"comm\": \"%s\"",
            (long long)cfg->world_size, comm_policy_names[cfg->comm]);
    if (cfg->comm == COMM_FSDP || cfg->comm == COMM_FSDP2)
        fprintf(f, ", \"reduce_dtype\": \"%s\"", dtype_name(cfg->reduce_dtype));
    fprintf(f, ", \"allreduce_algorithm\": \"%s\", \"hosts\": ",
            allreduce_algorithm_names[cfg->allreduce_algorithm]);
    json_text(f, cfg->hosts);
    fputs("},\n", f);
}
