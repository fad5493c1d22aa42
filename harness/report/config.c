/*
 * report/config.c: config.csv and report.md's configuration lines (see report/config.h).
 * Kinds (optimizers, losses, layers) are named and described by their registries.
 */
#include "config.h"

#include "results/columns.h"
#include "layers/layer.h"
#include "train/optimizers.h"
#include "results/results.h"

static const char *autocast_name(const case_config *cfg)
{
    return cfg->autocast ? dtype_name(cfg->autocast_dtype) : "off";
}

/* the loss's name in case files, from the layer registry */
static const char *loss_name(const case_config *cfg) { return loss_def_of(cfg->loss)->name; }

int config_csv_write(FILE *f, const void *ctx, char *err, int errlen)
{
    const case_config *cfg = ctx;
    char optim[128];
    optim_format(&cfg->optim, optim, sizeof optim);
    fprintf(f, "%s\n", csv_config.header);
    csv_write_field(f, cfg->name);
    fputc(',', f);
    csv_write_field(f, cfg->description);
    fputc(',', f);
    csv_write_field(f, cfg->baseline);
    fprintf(f, ",%s,%s,%s,%s,%s,%.9g,%.9g,%.9g,%lld,", dtype_name(cfg->params), autocast_name(cfg),
            cfg->loss_in_autocast ? "yes" : "no", cfg->master_weights ? "yes" : "no",
            cfg->scaler ? "yes" : "no", cfg->init_scale, cfg->growth_factor, cfg->backoff_factor,
            (long long)cfg->growth_interval);
    csv_write_field(f, optim);
    fprintf(f, ",%s,%lld,%lld,%llu\n", loss_name(cfg), (long long)cfg->batch, (long long)cfg->steps,
            (unsigned long long)cfg->seed);
    return 0;
}

void put_config_line(FILE *f, const case_config *cfg)
{
    char optim[128];
    optim_format(&cfg->optim, optim, sizeof optim);
    fprintf(f, "**Configuration:** params %s; autocast %s", dtype_name(cfg->params),
            autocast_name(cfg));
    if (cfg->autocast)
        fprintf(f, " (loss %s autocast)", cfg->loss_in_autocast ? "inside" : "outside");
    if (cfg->master_weights)
        fputs("; float32 master weights", f);
    if (cfg->scaler)
        fprintf(f,
                "; GradScaler (init_scale %g, growth_factor %g, backoff_factor %g, "
                "growth_interval %lld)",
                cfg->init_scale, cfg->growth_factor, cfg->backoff_factor,
                (long long)cfg->growth_interval);
    else
        fputs("; no GradScaler", f);
    fprintf(f, "; input %s, batch %lld; loss %s; optimizer %s; %lld step%s, seed %llu",
            dtype_name(cfg->input_dtype), (long long)cfg->batch, loss_name(cfg), optim,
            (long long)cfg->steps, cfg->steps == 1 ? "" : "s", (unsigned long long)cfg->seed);
    if (cfg->baseline[0])
        fprintf(f, "; baseline %s", cfg->baseline);
    fputs(".\n\n**Model:** ", f);
    for (int i = 0; i < cfg->n_layers; i++) {
        char what[256];
        layer_describe_at(cfg, i, what, sizeof what);
        fprintf(f, "%s%s", i ? ", " : "", what);
    }
    fputs(".\n\n", f);
}
