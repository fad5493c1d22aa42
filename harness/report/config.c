/* report/config.c: report.md's configuration lines (see report/config.h). */
#include "config.h"

void put_config_line(FILE *f, const record_config *cfg)
{
    fprintf(f, "**Configuration:** params %s; autocast %s", dtype_name(cfg->params),
            cfg->autocast ? dtype_name(cfg->autocast_dtype) : "off");
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
            dtype_name(cfg->input_dtype), (long long)cfg->batch, cfg->loss, cfg->optimizer,
            (long long)cfg->steps, cfg->steps == 1 ? "" : "s", (unsigned long long)cfg->seed);
    if (cfg->baseline[0])
        fprintf(f, "; baseline %s", cfg->baseline);
    if (cfg->gemm_sgemm || cfg->gemm_bf16) /* the CPU's: a GPU run has none */
        fprintf(f,
                "; CPU GEMMs: %lld with operands widened to float32 for sgemm, %lld on bfloat16 "
                "instructions",
                (long long)cfg->gemm_sgemm, (long long)cfg->gemm_bf16);
    fprintf(f, ".\n\n**Model:** %s.\n\n", cfg->model[0] ? cfg->model : "(config.csv names no layers)");
}
