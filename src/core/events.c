/*
 * What the application side learns between calls (core/events.h):
 * failures the detector published and communicators the program freed.
 * Revocation is core's own; the subscribers above core register at
 * MPI_Init (life/init.c), before any thread of the program calls MPI.
 */
#include "core/events.h"

#include "core/comm.h"
#include "core/ft.h"
#include "core/revoke.h"
#include "detect/detect.h"
#include "util/compiler.h"
#include "util/log.h"
#include "util/stats.h"

#define EVENT_HOOKS_MAX 8

_Atomic uint32_t ftw_seen_epoch;
_Atomic int ftw_running;

static ftw_failure_hook_t *failure_hooks[EVENT_HOOKS_MAX];
static int nfailure_hooks;
static ftw_released_hook_t *released_hooks[EVENT_HOOKS_MAX];
static int nreleased_hooks;

void ftw_on_failure(ftw_failure_hook_t *fn)
{
    if (nfailure_hooks == EVENT_HOOKS_MAX)
        ftw_fatal("more than %d failure hooks", EVENT_HOOKS_MAX);
    failure_hooks[nfailure_hooks++] = fn;
}

void ftw_on_comm_released(ftw_released_hook_t *fn)
{
    if (nreleased_hooks == EVENT_HOOKS_MAX)
        ftw_fatal("more than %d release hooks", EVENT_HOOKS_MAX);
    released_hooks[nreleased_hooks++] = fn;
}

/* The application side learns of failures: log each once, then tell the
 * subscribers in the order they registered. */
void ftw_failure_catch_up(void)
{
    uint32_t epoch = atomic_load_explicit(&ftw_fail_epoch,
                                          memory_order_acquire);
    uint32_t seen = atomic_load_explicit(&ftw_seen_epoch,
                                         memory_order_relaxed);

    /* The thread that moves ftw_seen_epoch logs the failures it passes
     * (each once, whichever thread catches up first). */
    while (seen < epoch &&
           !atomic_compare_exchange_weak(&ftw_seen_epoch, &seen, epoch))
        ;
    for (uint32_t i = seen; i < epoch; i++) {
        ftw_info("learned that world rank %d failed", ftw_detect_failure(i));
        ftw_stat_add(FTW_STAT_FAILURES_SEEN, 1);
    }
    for (int i = 0; i < nfailure_hooks; i++)
        failure_hooks[i]();
}

void ftw_comm_released(MPI_Comm comm)
{
    uint64_t id = ftw_comm_untrack(comm);

    for (int i = 0; i < nreleased_hooks; i++)
        released_hooks[i](comm, id);
    ftw_revoke_comm_freed(id);
}

int ftw_initialized(void)
{
    return ftw_running;
}
