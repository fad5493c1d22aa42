/*
 * record.c: a run's record in memory (see record.h): growing arrays of rows, the strings
 * kept once in blocks that never move (an open-addressing table finds them), the names the
 * run has seen with their dtypes, and the outcome of [expect] in words.
 */
#include "record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *tensor_role_name(tensor_role r)
{
    static const char *const names[ROLE_COUNT] = {
        [ROLE_INPUT] = "input",
        [ROLE_TARGET] = "target",
        [ROLE_PARAM] = "param",
        [ROLE_ACTIVATION] = "activation",
        [ROLE_LOSS] = "loss",
        [ROLE_CAST] = "cast",
        [ROLE_GRAD_ACTIVATION] = "grad_activation",
        [ROLE_GRAD_CAST] = "grad_cast",
        [ROLE_GRAD_PARAM] = "grad_param",
        [ROLE_OPTIMIZER_STATE] = "optimizer_state",
        [ROLE_MASTER_PARAM] = "master_param",
        [ROLE_GRAD_MASTER] = "grad_master",
        [ROLE_BUFFER] = "buffer",
    };
    return r >= 0 && r < ROLE_COUNT ? names[r] : "?";
}

const char *pass_name(pass_kind p)
{
    static const char *const names[PASS_COUNT] = {
        [PASS_FORWARD] = "forward", [PASS_BACKWARD] = "backward", [PASS_OPTIMIZER] = "optimizer"};
    return p >= 0 && p < PASS_COUNT ? names[p] : "?";
}

bool tensor_role_parse(const char *s, tensor_role *r)
{
    for (int i = 0; i < ROLE_COUNT; i++)
        if (strcmp(s, tensor_role_name((tensor_role)i)) == 0) {
            *r = (tensor_role)i;
            return true;
        }
    return false;
}

bool pass_parse(const char *s, pass_kind *p)
{
    for (int i = 0; i < PASS_COUNT; i++)
        if (strcmp(s, pass_name((pass_kind)i)) == 0) {
            *p = (pass_kind)i;
            return true;
        }
    return false;
}

bool tensor_role_is_grad(tensor_role r)
{
    return r == ROLE_GRAD_ACTIVATION || r == ROLE_GRAD_CAST || r == ROLE_GRAD_PARAM ||
           r == ROLE_GRAD_MASTER;
}

run_record *record_new(void) { return calloc(1, sizeof(run_record)); }

static void strings_free(record_strings *s)
{
    for (int i = 0; i < s->n_blocks; i++)
        free(s->blocks[i]);
    free(s->blocks);
    free(s->slots);
    memset(s, 0, sizeof *s);
}

void record_clear(run_record *rec)
{
    free(rec->tensors);
    free(rec->bins);
    free(rec->steps);
    free(rec->memory);
    free(rec->fp8);
    free(rec->allreduce);
    free(rec->ranks);
    free(rec->expects);
    strings_free(&rec->strings);
    memset(rec, 0, sizeof *rec);
}

void record_free(run_record *rec)
{
    if (!rec)
        return;
    record_clear(rec);
    free(rec);
}

/* FNV-1a */
static uint64_t hash_of(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* the slot of s: its own, or the empty one it would take */
static record_name *slot_of(const record_strings *t, const char *s, uint64_t h)
{
    for (int64_t i = (int64_t)(h & (uint64_t)(t->n_slots - 1));; i = (i + 1) & (t->n_slots - 1)) {
        record_name *e = &t->slots[i];
        if (!e->s || (e->hash == h && strcmp(e->s, s) == 0))
            return e;
    }
}

static bool grow_slots(record_strings *t)
{
    int64_t n = t->n_slots ? 2 * t->n_slots : 1024;
    record_name *old = t->slots, *slots = calloc((size_t)n, sizeof *slots);
    if (!slots)
        return false;
    int64_t old_n = t->n_slots;
    t->slots = slots;
    t->n_slots = n;
    for (int64_t i = 0; i < old_n; i++)
        if (old[i].s)
            *slot_of(t, old[i].s, old[i].hash) = old[i];
    free(old);
    return true;
}

/* len + 1 bytes in the current block, or in a new one */
static char *block_take(record_strings *t, size_t len)
{
    if (t->n_blocks == 0 || t->block_used + len + 1 > t->block_size) {
        if (t->n_blocks == t->cap_blocks) {
            int cap = t->cap_blocks ? 2 * t->cap_blocks : 16;
            char **b = realloc(t->blocks, sizeof *b * (size_t)cap);
            if (!b)
                return NULL;
            t->blocks = b;
            t->cap_blocks = cap;
        }
        size_t size = len + 1 > 65536 ? len + 1 : 65536;
        char *block = malloc(size);
        if (!block)
            return NULL;
        t->blocks[t->n_blocks++] = block;
        t->block_size = size;
        t->block_used = 0;
    }
    char *p = t->blocks[t->n_blocks - 1] + t->block_used;
    t->block_used += len + 1;
    return p;
}

/* the entry of s, added when new; NULL when out of memory */
static record_name *name_entry(run_record *rec, const char *s)
{
    record_strings *t = &rec->strings;
    if ((t->n + 1) * 2 > t->n_slots && !grow_slots(t)) {
        rec->out_of_memory = true;
        return NULL;
    }
    uint64_t h = hash_of(s);
    record_name *e = slot_of(t, s, h);
    if (e->s)
        return e;
    size_t len = strlen(s);
    char *copy = block_take(t, len);
    if (!copy) {
        rec->out_of_memory = true;
        return NULL;
    }
    memcpy(copy, s, len + 1);
    *e = (record_name){.s = copy, .hash = h};
    t->n++;
    return e;
}

const char *record_intern(run_record *rec, const char *s)
{
    if (!s || !*s)
        return "";
    record_name *e = name_entry(rec, s);
    return e ? e->s : "";
}

void record_seen(run_record *rec, const char *name, dtype dt)
{
    record_name *e = name_entry(rec, name);
    if (e) {
        e->seen = true;
        e->dt = dt;
    }
}

bool record_find(const run_record *rec, const char *name, dtype *dt)
{
    const record_strings *t = &rec->strings;
    if (!t->n_slots)
        return false;
    const record_name *e = slot_of(t, name, hash_of(name));
    if (!e->s || !e->seen)
        return false;
    *dt = e->dt;
    return true;
}

/* a zeroed element at the end of *arr (n, cap elements of size), or NULL */
static void *array_add(run_record *rec, void **arr, int64_t *n, int64_t *cap, size_t size)
{
    if (*n == *cap) {
        int64_t c = *cap ? 2 * *cap : 64;
        void *a = realloc(*arr, size * (size_t)c);
        if (!a) {
            rec->out_of_memory = true;
            return NULL;
        }
        *arr = a;
        *cap = c;
    }
    void *e = (char *)*arr + size * (size_t)(*n)++;
    memset(e, 0, size);
    return e;
}

#define RECORD_ADD(fn, type, name)                                                                 \
    type *fn(run_record *rec)                                                                      \
    {                                                                                              \
        return array_add(rec, (void **)&rec->name, &rec->n_##name, &rec->cap_##name,               \
                         sizeof(type));                                                            \
    }

RECORD_ADD(record_add_tensor, record_tensor, tensors)
RECORD_ADD(record_add_step, record_step, steps)
RECORD_ADD(record_add_memory, record_memory, memory)
RECORD_ADD(record_add_fp8, record_fp8, fp8)
RECORD_ADD(record_add_allreduce, record_allreduce, allreduce)
RECORD_ADD(record_add_rank, record_rank, ranks)
RECORD_ADD(record_add_expect, record_expect, expects)

void record_add_bin(run_record *rec, int64_t row, int bin, int64_t count)
{
    record_bin *b = array_add(rec, (void **)&rec->bins, &rec->n_bins, &rec->cap_bins, sizeof *b);
    if (!b)
        return;
    b->bin = bin;
    b->count = count;
    record_tensor *t = &rec->tensors[row];
    if (t->n_bins++ == 0)
        t->first_bin = rec->n_bins - 1;
}

double record_g9(double x)
{
    char s[40];
    snprintf(s, sizeof s, "%.9g", x);
    return strtod(s, NULL);
}

void record_expect_result(run_record *rec)
{
    case_result *res = &rec->result;
    const char *path = rec->config.path;
    int off = 0;
    res->expect_passed = res->expect_total = 0;
    res->failures[0] = '\0';
    bool all = true;
    for (int64_t i = 0; i < rec->n_expects; i++) {
        const record_expect *e = &rec->expects[i];
        res->expect_total += e->line >= 0;
        res->expect_passed += e->line >= 0 && e->held;
        all &= e->held;
        if (e->held)
            continue;
        if (e->line >= 0)
            off += snprintf(res->failures + off, sizeof res->failures - (size_t)off,
                            "%s:%d: expectation failed: %s\n", path, e->line, e->failure);
        else
            off += snprintf(res->failures + off, sizeof res->failures - (size_t)off, "%s: %s\n",
                            path, e->failure);
        if (off >= (int)sizeof res->failures)
            off = (int)sizeof res->failures - 1;
    }
    res->passed = all;
}
