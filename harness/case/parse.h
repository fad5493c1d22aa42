/*
 * case/parse.h: what the files of the case parser share (load.h is the public side).
 *
 *   case/load.c      case_load: the passes, the defaults, the errors collected and sorted
 *   case/read.c      the file read and cut into entries; sections' headers; --set overrides
 *   case/values.c    words, names and "did you mean" hints; numbers, booleans, choices,
 *                    dtypes, files; name=value options, and a kind's options (layer.h)
 *   case/sections.c  the keys of [case], [data], [precision], [scaler], [train], [init],
 *                    [expect], [fp8]
 *   case/model.c     [model]'s layers and [train]'s loss, read through the kinds' registry
 *   case/optim.c     [train]'s optimizer and its options, read through optimizers.h
 *   case/check.c     the checks across sections: shapes, target, observe, .npy files
 *   case/json.c      the normalized configuration as JSON (`ampscope check --json`)
 *   case/distributed.c  [distributed]'s keys and their part of the JSON
 *
 * An error is reported with report() (a line of the file, or an override) or err_at() (an
 * entry, which is marked failed so that later checks skip it).
 */
#ifndef AMPSCOPE_CASE_PARSE_H
#define AMPSCOPE_CASE_PARSE_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* vasprintf, stpcpy */
#endif
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "config/case.h"
#include "load.h"
#include "layers/layer.h"

#define LINE_MAX_BYTES (64 * 1024)
#define FILE_MAX_BYTES (16 * 1024 * 1024)
#define MAX_ENTRIES 1024                /* keys in one case, overrides included */
#define MAX_WORDS 32                    /* words in one value */
#define MEMORY_LIMIT ((int64_t)1 << 40) /* elements: all parameters, or one activation */
#define ALNUM "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
#define PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))

enum {
    SEC_CASE,
    SEC_MODEL,
    SEC_DATA,
    SEC_PRECISION,
    SEC_SCALER,
    SEC_TRAIN,
    SEC_INIT,
    SEC_EXPECT,
    SEC_DISTRIBUTED,
    SEC_FP8,
    SEC_COUNT
};
enum { SEC_NONE = -1, SEC_SKIP = -2 }; /* before any header; inside an unknown or repeated one */

extern const char *const section_names[SEC_COUNT];               /* case/read.c */
extern const char *const schedule_names[], *const input_names[], /* case/sections.c */
                                               *const target_names[];
extern const char *const fp8_format_names[], *const fp8_recipe_names[], /* case/sections.c */
    *const fp8_amax_algo_names[];

typedef struct entry {
    int sec;
    char *key, *value; /* trimmed; inner blanks of the key squeezed to one space */
    int line;          /* 0 for an override */
    const char *set;   /* the override as given; NULL for a file line */
    bool failed;       /* an error was reported about it */
} entry;

typedef struct pending {
    int line, set, seq; /* sort keys: overrides come after the file, in their order */
    char *msg;
} pending;

typedef struct parse_ctx {
    case_config *cfg;
    const char *path;
    const char *const *sets;
    int n_sets;
    char *text;        /* the file, cut in place into keys and values */
    char **set_copies; /* overrides, cut likewise */
    int n_set_copies, cap_set_copies;
    entry *entries;
    int n_entries, cap_entries;
    bool full_reported;        /* "too many keys" is said once */
    int sec_line[SEC_COUNT];   /* line of the [section] header; 0: not in the file */
    bool sec_given[SEC_COUNT]; /* in the file or added by an override */
    entry *layer_entry[CASE_MAX_LAYERS];
    bool model_ok;  /* every [model] entry became a layer */
    bool shapes_ok; /* every layer's out_shape is known */
    pending *errs;
    int n_errs, cap_errs;
} parse_ctx;

/* ---- memory and messages (case.c) ---- */

void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
PRINTF_LIKE(1, 2) char *xasprintf(const char *fmt, ...);
/* Returns p with room for `need` elements of `size` bytes; *cap is its capacity. */
void *grow(void *p, int *cap, int need, size_t size);
/* An error at a line of the file (0: none applies), or about an override when set != NULL. */
PRINTF_LIKE(4, 5) void report(parse_ctx *c, int line, const char *set, const char *fmt, ...);
/* An error about entry e, which is marked failed. */
PRINTF_LIKE(3, 4) void err_at(parse_ctx *c, entry *e, const char *fmt, ...);

/* ---- the file and its entries (case/read.c) ---- */

/* Reads the file into entries; false when there is nothing to go on with. */
bool read_lines(parse_ctx *c);
/* An override "section.key=value", validated later like a line at the end of its section. */
void apply_set(parse_ctx *c, const char *set);
entry *find_entry(parse_ctx *c, int sec, const char *key);
bool has_entries(parse_ctx *c, int sec);
bool entry_failed(parse_ctx *c, int sec, const char *key);

/* ---- words, names and values (case/values.c) ---- */

bool is_blank(char ch);
char *trim(char *s);
/* Squeezes each run of blanks in s into one space: "dtype   x" and "dtype x" are one key. */
void squeeze_blanks(char *s);
int find_name(const char *const *names, int n, const char *s);
/* "a, b, c" (last_sep ", ") or "a, b or c" (last_sep " or "); the caller frees it. */
char *join_names(const char *const *names, int n, const char *last_sep);
/* The name closest to word (edit distance <= 2, else one a prefix of the other), or NULL. */
const char *closest(const char *word, const char *const *names, int n);
/* "did you mean 'x'?" when a name is close to word, else "<label>: a, b, c"; caller frees. */
char *hint(const char *word, const char *const *names, int n, const char *label);
bool valid_case_name(const char *s);
bool valid_layer_name(const char *s);
bool valid_tensor_name(const char *s);

/* A value split into words; "->" and "=" are words of their own and blanks around ',' are
 * dropped, so "linear 3->4 bias = no" and "betas=0.9, 0.999" read as meant. */
typedef struct words {
    char *buf;
    char *w[MAX_WORDS];
    int n;
} words;
/* false (after reporting on e) when the value has too many words; else free t->buf later. */
bool split_words(parse_ctx *c, entry *e, words *t);
/* Reads "name = value" triples from t->w[first..] into vals (indexed like names, NULL when
 * absent); owner names the thing they belong to in messages. */
bool parse_options(parse_ctx *c, entry *e, const words *t, int first, const char *owner,
                   const char *const *names, int n, const char **vals);
/* A kind's options (layers/layer.h), into the fields of base (a layer_spec, or the
 * case_config for a loss): their defaults; their names in t->w[first..] (vals as for
 * parse_options); the values given, checked as each option's type says. false after an
 * error. */
void kind_option_defaults(const kind_opt *opts, int n, void *base);
bool kind_option_names(parse_ctx *c, entry *e, const words *t, int first, const char *owner,
                       const kind_opt *opts, int n, const char **vals);
bool kind_option_values(parse_ctx *c, entry *e, const char *owner, const kind_opt *opts, int n,
                        const char *const *vals, void *base);

/* 0, EINVAL (not a whole decimal integer) or ERANGE (beyond int64). */
int scan_i64(const char *s, int64_t *out);
/* Parses an integer >= min (0 or 1) into *out. */
bool parse_int(parse_ctx *c, entry *e, const char *s, const char *what, int64_t min, int64_t *out);
bool parse_real(parse_ctx *c, entry *e, const char *s, const char *what, real_range r, double *out);
bool parse_bool(parse_ctx *c, entry *e, const char *s, const char *what, bool *out);
/* Index of s in names, or -1 after "bad value 's' for what: expected a, b or c". */
int parse_choice(parse_ctx *c, entry *e, const char *s, const char *what, const char *const *names,
                 int n);
/* a compute dtype (float32, float16, bfloat16); with `observed` ([expect]) also int64 and
 * the float8 dtypes of [fp8]'s quantized copies */
bool parse_dtype(parse_ctx *c, entry *e, const char *what, bool observed, dtype *out);
/* 1: e's value is "file PATH" and PATH (resolved into path) is a file; 0: not "file ...";
 * -1: an error was reported. */
int parse_file_value(parse_ctx *c, entry *e, char *path);
/* names[0..n-2] are words, names[n-1] is "file" (then PATH follows); -1 after an error. */
int parse_source(parse_ctx *c, entry *e, const char *const *names, int n, char *path);
/* e's value, a path resolved against the case file's folder into path (CASE_PATH_MAX), which
 * must be a file; false after an error */
bool parse_path(parse_ctx *c, entry *e, char *path);
/* the same for one word of e's value (a constant's PATH) */
bool parse_path_word(parse_ctx *c, entry *e, const char *word, char *path);
/* A JSON string, or null when s is empty (case/json.c) */
void json_text(FILE *f, const char *s);

/* ---- sections (case/sections.c, case/model.c, case/optim.c) ---- */

/* Only a description may be empty. */
bool need_value(parse_ctx *c, entry *e);
void parse_case_section(parse_ctx *c);
void parse_model_section(parse_ctx *c);
void parse_data_section(parse_ctx *c);
void parse_precision_section(parse_ctx *c);
void parse_scaler_section(parse_ctx *c);
void parse_train_section(parse_ctx *c);
void parse_init_section(parse_ctx *c);
void parse_expect_section(parse_ctx *c);
void parse_distributed_section(parse_ctx *c); /* case/distributed.c */
void parse_fp8_section(parse_ctx *c);         /* after [model]: resolves the layer names */
void key_loss(parse_ctx *c, entry *e);      /* case/model.c */
void key_optimizer(parse_ctx *c, entry *e); /* case/optim.c */

/* ---- across sections (case/check.c) ---- */

void cross_checks(parse_ctx *c);
/* [fp8]'s checks that need the shapes: its layers' shapes, the dtypes (case/check.c) */
void check_fp8(parse_ctx *c);

#endif
