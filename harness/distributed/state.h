/*
 * distributed/state.h: this process's state as a rank, shared by distributed.c (the
 * trainer's hooks) and cli/launch.c (the rank's run, which sets it).
 */
#ifndef AMPSCOPE_DISTRIBUTED_STATE_H
#define AMPSCOPE_DISTRIBUTED_STATE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct distributed_state {
    bool active; /* this process is a rank of a distributed case */
    int rank, world_size;
    char dump_dir[4096];   /* --dump DIR --dump-ranks: DIR/rank-R, this rank's own gradients */
    const char *dump_only; /* --dump-only PATTERN, or NULL */
} distributed_state;

extern distributed_state dist;

#endif
