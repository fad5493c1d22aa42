/*
 * load.h: reading a case file (cases/NAME.case) into a case_config (config/case.h).
 *
 * case_load() reads the file, applies `--set section.key=value` overrides as if they were
 * written at the end of their section, checks every key and value against the kinds'
 * descriptions (layers/layer.h), the optimizers' (train/optimizers.h) and the data parallel
 * policies' (distributed/distributed.h), and checks the model's shapes against the data
 * (each layer's output shape is stored in its layer_spec). Every problem found is appended
 * to `errs` as "file:line: message" (line 0: no line applies); the caller prints them and
 * exits 2. Nothing here allocates tensors or touches results/. The parser's files are
 * listed in parse.h.
 */
#ifndef AMPSCOPE_CASE_LOAD_H
#define AMPSCOPE_CASE_LOAD_H

#include <stdio.h>

#include "config/case.h"

typedef struct err_list {
    char **msgs;
    int n, cap;
} err_list;

#ifdef __cplusplus
extern "C" {
#endif

/* Returns the number of errors appended to errs (0: cfg is valid). sets: "section.key=value". */
int case_load(const char *path, const char *const *sets, int n_sets, case_config *cfg,
              err_list *errs);
/* Writes the normalized configuration as one JSON object (for `ampscope check --json`).
 * Returns 0, or -1 when the stream's error flag is set afterwards (a write failed). */
int case_write_json(const case_config *cfg, FILE *f);

void err_list_add(err_list *e, const char *fmt, ...);
void err_list_free(err_list *e);

#ifdef __cplusplus
}
#endif

#endif
