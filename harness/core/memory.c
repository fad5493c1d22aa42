/* memory.c: names of the memory categories (see memory.h). */
#include "memory.h"

const char *mem_category_name(mem_category c)
{
    static const char *const names[MEM_CATEGORY_COUNT] = {
        [MEM_PARAMS] = "params",
        [MEM_GRADS] = "grads",
        [MEM_MASTER_PARAMS] = "master_params",
        [MEM_OPTIMIZER_STATE] = "optimizer_state",
        [MEM_ACTIVATIONS] = "activations",
        [MEM_AUTOCAST_CACHE] = "autocast_cache",
        [MEM_INPUTS] = "inputs",
        [MEM_BUFFERS] = "buffers",
        [MEM_WORKSPACE] = "workspace",
    };
    return c < MEM_CATEGORY_COUNT ? names[c] : "?";
}
