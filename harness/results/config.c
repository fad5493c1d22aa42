/*
 * results/config.c: a case's configuration into its record (record_config: what config.csv
 * holds and the reports give), from the checked case_config; kinds (layers, losses,
 * optimizers, communication policies) named and described by their registries.
 */
#include "results.h"

#include <string.h>

#include "distributed/distributed.h"
#include "layers/layer.h"
#include "train/optimizers.h"

void results_record_config(run_record *rec, const case_config *cfg)
{
    record_config *c = &rec->config;
    memset(c, 0, sizeof *c);
    rec->has_config = true;
    snprintf(c->name, sizeof c->name, "%s", cfg->name);
    snprintf(c->path, sizeof c->path, "%s", cfg->path);
    snprintf(c->description, sizeof c->description, "%s", cfg->description);
    snprintf(c->baseline, sizeof c->baseline, "%s", cfg->baseline);
    c->params = cfg->params;
    c->input_dtype = cfg->input_dtype;
    c->autocast = cfg->autocast;
    c->autocast_dtype = cfg->autocast_dtype;
    c->loss_in_autocast = cfg->loss_in_autocast;
    c->master_weights = cfg->master_weights;
    c->scaler = cfg->scaler;
    c->init_scale = record_g9(cfg->init_scale);
    c->growth_factor = record_g9(cfg->growth_factor);
    c->backoff_factor = record_g9(cfg->backoff_factor);
    c->growth_interval = cfg->growth_interval;
    optim_format(&cfg->optim, c->optimizer, sizeof c->optimizer);
    snprintf(c->loss, sizeof c->loss, "%s", loss_def_of(cfg->loss)->name);
    c->batch = cfg->batch;
    c->steps = cfg->steps;
    c->seed = cfg->seed;
    int off = 0;
    for (int i = 0; i < cfg->n_layers && off < (int)sizeof c->model; i++) {
        char what[256];
        layer_describe_at(cfg, i, what, sizeof what);
        off += snprintf(c->model + off, sizeof c->model - (size_t)off, "%s%s", i ? ", " : "", what);
    }
    c->accumulate = cfg->accumulate;
    c->delay_unscale = cfg->delay_unscale;
    c->clip_grad_norm = record_g9(cfg->clip_grad_norm);
    c->norm_type = record_g9(cfg->norm_type);
    c->clip_grad_value = record_g9(cfg->clip_grad_value);
    c->clip_before_unscale = cfg->clip_before_unscale;
    c->fp8 = cfg->fp8;
    c->fp8_recipe = cfg->fp8_recipe;
    c->world_size = cfg->world_size;
    snprintf(c->comm, sizeof c->comm, "%s", comm_policy_names[cfg->comm]);
    c->reduce_dtype = cfg->reduce_dtype;
    snprintf(c->allreduce_algorithm, sizeof c->allreduce_algorithm, "%s",
             allreduce_algorithm_names[cfg->allreduce_algorithm]);
}
