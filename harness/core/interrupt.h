/*
 * interrupt.h: SIGINT and SIGTERM during `ampscope run`. The handler only records the
 * signal. The first one asks the run to stop after the step it is in (the trainer looks
 * after every step: train.c), so the completed steps' results are written and kept; a
 * second one stops at once (the run looks whenever it allocates a tensor: run_tensor),
 * and the case's temporary folder is discarded, so OUT keeps what it had.
 *
 * A rank of a distributed case is told by the launcher through the signals mpirun forwards
 * to its ranks (cli/launch.c): SIGUSR1 for a SIGINT, SIGUSR2 for a SIGTERM, each recorded
 * as that signal's first arrival; a second signal is the launcher's to act on (it ends
 * mpirun, which ends the ranks).
 */
#ifndef AMPSCOPE_INTERRUPT_H
#define AMPSCOPE_INTERRUPT_H

#include <stdbool.h>

/* SIGINT and SIGTERM recorded; on a rank, SIGUSR1 and SIGUSR2 as they stand for (rank) */
void interrupt_install(bool rank);
/* The first signal received (SIGINT or SIGTERM), or 0. */
int interrupt_signal(void);
/* A second signal was received: stop at once. */
bool interrupt_stop_now(void);
/* "SIGINT", "SIGTERM" */
const char *interrupt_name(int sig);

#endif
