/*
 * interrupt.h: SIGINT and SIGTERM during `ampscope run`. The handler only records the
 * signal; the run checks it whenever it allocates a tensor (run_tensor) and ends the case
 * there with run_fail, so the case's temporary folder is discarded, earlier cases' results
 * are kept, and summary.csv gets the rows of the cases that finished.
 */
#ifndef AMPSCOPE_INTERRUPT_H
#define AMPSCOPE_INTERRUPT_H

void interrupt_install(void);
/* The signal received (SIGINT, SIGTERM), or 0. */
int interrupt_signal(void);

#endif
