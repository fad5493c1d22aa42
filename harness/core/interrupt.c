/* interrupt.c: records SIGINT and SIGTERM for the run to notice (see interrupt.h). */
#include "interrupt.h"

#include <signal.h>
#include <stdatomic.h>
#include <string.h>

/* lock-free atomics: the handler may run in any of the process's threads (OpenMP's), two
 * signals at once in two of them */
static atomic_int received, count;

static void on_signal(int sig)
{
    /* a rank's SIGUSR1 and SIGUSR2 stand for the launcher's SIGINT and SIGTERM */
    int as = sig == SIGUSR1 ? SIGINT : sig == SIGUSR2 ? SIGTERM : sig, none = 0;
    atomic_compare_exchange_strong(&received, &none, as);
    atomic_fetch_add(&count, 1);
}

void interrupt_install(bool rank)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: a wait for mpirun returns to forward it */
    sigemptyset(&sa.sa_mask);
    if (rank) {
        sigaction(SIGUSR1, &sa, NULL);
        sigaction(SIGUSR2, &sa, NULL);
    } else {
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
    }
}

int interrupt_signal(void) { return atomic_load(&received); }

bool interrupt_stop_now(void) { return atomic_load(&count) >= 2; }

const char *interrupt_name(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal"; }
