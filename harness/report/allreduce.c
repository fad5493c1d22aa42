/* report/allreduce.c: the all-reduce section of report.md (see report/allreduce.h). */
#include "allreduce.h"

#include <string.h>

#include "distributed/distributed.h"

/* the index of name in names[0..n); 0 (the first) when none */
static int index_of(const char *const *names, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], name))
            return i;
    return 0;
}

void report_put_allreduce(FILE *f, const run_record *rec)
{
    if (!rec->has_allreduce)
        return;
    const record_config *cfg = &rec->config;
    comm_policy comm = (comm_policy)index_of(comm_policy_names, COMM_POLICY_COUNT, cfg->comm);
    int algorithm =
        index_of(allreduce_algorithm_names, allreduce_algorithm_count, cfg->allreduce_algorithm);
    comm_plan p = distributed_plan(comm, cfg->params, cfg->reduce_dtype, cfg->world_size);
    fprintf(f, "\n## All-reduce\n\n%lld ranks over MPI, comm = %s", (long long)cfg->world_size,
            comm_policy_names[comm]);
    if (comm == COMM_FSDP || comm == COMM_FSDP2)
        fprintf(f, " reduce_dtype=%s", dtype_name(cfg->reduce_dtype));
    fprintf(f, ": gradients travel in %s",
            comm == COMM_DDP ? ".grad's dtype" : dtype_name(p.wire));
    if (p.premul != 1)
        fprintf(f, ", multiplied by 1/%lld before the sum", (long long)cfg->world_size);
    if (p.prediv > 1)
        fprintf(f, ", divided by %g before the sum", p.prediv);
    if (p.postdiv > 1)
        fprintf(f, ", divided by %g after it", p.postdiv);
    fprintf(f, "; one all-reduce per parameter; Open MPI's allreduce algorithm: %s.\n\n",
            algorithm ? allreduce_algorithm_names[algorithm]
                      : "default (its tuned decision rules, by message size and ranks; not "
                        "pinned)");
    int64_t last = -1;
    for (int64_t i = 0; i < rec->n_allreduce; i++)
        if (rec->allreduce[i].step > last)
            last = rec->allreduce[i].step;
    if (last < 0)
        return;
    fprintf(f, "What the all-reduce lost at step %lld, against the exact mean of the ranks' "
               "gradients (allreduce.csv has every observed step):\n\n",
            (long long)last);
    fputs("| gradient | underflow | overflow | non-finite | relative error | SQNR (dB) |\n"
          "|---|---:|---:|---:|---:|---:|\n",
          f);
    for (int64_t i = 0; i < rec->n_allreduce; i++) {
        const record_allreduce *w = &rec->allreduce[i];
        if (w->step == last)
            fprintf(f, "| %s | %lld | %lld | %lld | %.3g | %.1f |\n", w->tensor,
                    (long long)w->underflow, (long long)w->overflow, (long long)w->nonfinite,
                    w->rel_error, w->sqnr_db);
    }
}
