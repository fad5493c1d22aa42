/* tensor.c: tensor allocation through the backend, reference counts and the run's pool
 * (see tensor.h). Every byte is counted in the pool's memory account by category. A released
 * tensor's struct goes to the pool's list of spares, which the next tensor takes, so that a
 * step that makes no more tensors than the steps before it makes no heap calls for them. */
#include "tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

int64_t shape_numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

int64_t tensor_bytes(const tensor *t) { return t->numel * (int64_t)dtype_size(t->dtype); }

/* calloc and free calls for tensor structs, by every pool of the process */
static int64_t struct_heap_calls;

int64_t tensor_heap_calls(void) { return struct_heap_calls; }

/* a zeroed struct: a spare of the pool's, else a new one */
static tensor *struct_take(tensor_pool *pool)
{
    tensor *t = pool->spare;
    if (t) {
        pool->spare = t->next_in_pool;
        memset(t, 0, sizeof *t);
        return t;
    }
    struct_heap_calls++;
    return calloc(1, sizeof *t);
}

/* t's struct kept as a spare for the next tensor */
static void struct_give(tensor_pool *pool, tensor *t)
{
    t->next_in_pool = pool->spare;
    pool->spare = t;
}

/* a tensor without data, linked into the pool */
static tensor *tensor_make(tensor_pool *pool, const char *name, dtype dt, int ndim,
                           const int64_t *shape, mem_category cat, char *err, int errlen)
{
    tensor *t = struct_take(pool);
    if (!t) {
        snprintf(err, (size_t)errlen, "out of host memory for tensor %s", name);
        return NULL;
    }
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = dt;
    t->ndim = ndim;
    if (ndim)
        memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    t->numel = shape_numel(ndim, shape);
    t->category = cat;
    t->refs = 1;
    t->grad_fn = -1;
    t->next_in_pool = pool->head;
    if (pool->head)
        pool->head->prev_in_pool = t;
    pool->head = t;
    return t;
}

static void tensor_unlink(tensor_pool *pool, tensor *t)
{
    if (t->prev_in_pool)
        t->prev_in_pool->next_in_pool = t->next_in_pool;
    else
        pool->head = t->next_in_pool;
    if (t->next_in_pool)
        t->next_in_pool->prev_in_pool = t->prev_in_pool;
}

tensor *tensor_new(tensor_pool *pool, const char *name, dtype dt, int ndim, const int64_t *shape,
                   mem_category cat, char *err, int errlen)
{
    tensor *t = tensor_make(pool, name, dt, ndim, shape, cat, err, errlen);
    if (!t)
        return NULL;
    int64_t bytes = tensor_bytes(t);
    if (bytes > 0 && pool->be) {
        t->data = pool->be->alloc(pool->be, bytes);
        if (!t->data) {
            snprintf(err, (size_t)errlen, "%s (tensor %s, %lld bytes)", pool->be->err, name,
                     (long long)bytes);
            tensor_unlink(pool, t);
            struct_give(pool, t);
            return NULL;
        }
    }
    mem_account_add(pool->account, cat, bytes);
    return t;
}

tensor *tensor_view(tensor_pool *pool, tensor *base, const char *name, int ndim,
                    const int64_t *shape, char *err, int errlen)
{
    tensor *t = tensor_make(pool, name, base->dtype, ndim, shape, base->category, err, errlen);
    if (!t)
        return NULL;
    t->data = base->data;
    t->base = base;
    tensor_retain(base);
    return t;
}

void tensor_retain(tensor *t) { t->refs++; }

/* frees t's data and keeps its struct as a spare; a view releases its base unless the whole
 * pool is being cleared */
static void tensor_destroy(tensor_pool *pool, tensor *t, bool release_base)
{
    tensor_unlink(pool, t);
    tensor *base = t->base;
    if (!base) {
        mem_account_add(pool->account, t->category, -tensor_bytes(t));
        if (t->data)
            pool->be->free(pool->be, t->data);
    }
    struct_give(pool, t);
    if (base && release_base)
        tensor_release(pool, base);
}

void tensor_release(tensor_pool *pool, tensor *t)
{
    if (t && --t->refs == 0)
        tensor_destroy(pool, t, true);
}

void tensor_pool_clear(tensor_pool *pool)
{
    while (pool->head)
        tensor_destroy(pool, pool->head, false);
    while (pool->spare) {
        tensor *t = pool->spare;
        pool->spare = t->next_in_pool;
        free(t);
        struct_heap_calls++;
    }
}

void tensor_shape_str(const tensor *t, char *buf, int len)
{
    int off = 0;
    buf[0] = '\0';
    for (int i = 0; i < t->ndim && off < len; i++)
        off +=
            snprintf(buf + off, (size_t)(len - off), i ? "x%lld" : "%lld", (long long)t->shape[i]);
    if (t->ndim == 0)
        snprintf(buf, (size_t)len, "scalar");
}
