/* Waiting: what changed since the last look, and what an idle turn runs
 * (core/progress.h). */
#include "core/progress.h"

#include <sched.h>

#include "core/comm.h"
#include "core/ft.h"
#include "core/request.h"
#include "core/revoke.h"
#include "detect/detect.h"
#include "util/log.h"
#include "xport/xport.h"

int ftw_poll_changed(ftw_poll_t *p)
{
    uint32_t e = atomic_load_explicit(&ftw_fail_epoch, memory_order_relaxed);
    uint32_t d = atomic_load_explicit(&ftw_drain_seq, memory_order_relaxed);

    ftw_revoke_check();
    if (ftw_likely(e == p->epoch && d == p->drains &&
                   ftw_revoke_gen == p->revokes))
        return 0;
    p->epoch = e;
    ftw_wrap_check();       /* may run failure handlers, even a drain */
    p->drains = atomic_load_explicit(&ftw_drain_seq, memory_order_relaxed);
    p->revokes = ftw_revoke_gen;
    return 1;
}

#define FTW_SPINS_BEFORE_YIELD 20000
#define FTW_SPINS_BEFORE_SLEEP 2000

static _Atomic int windows;     /* made here and not freed */

void ftw_win_count(int delta)
{
    atomic_fetch_add_explicit(&windows, delta, memory_order_relaxed);
}

/* Waiting long: give the core to the processes this one waits for (jobs
 * often have more ranks than cores).  Spinning, now and then, so a waiter
 * that has the core to itself loses little; or sleeping (FTW_IDLE), but
 * not while this process has a window: other processes' passive-target
 * operations on it move only when it polls. */
void ftw_poll_backoff(unsigned spins)
{
    if (ftw_idle_sleep &&
        atomic_load_explicit(&windows, memory_order_relaxed) == 0) {
        if (spins > FTW_SPINS_BEFORE_SLEEP)
            ftw_detect_pause();
    } else if (spins > FTW_SPINS_BEFORE_YIELD && (spins & 15) == 0) {
        sched_yield();
    }
}

#define PROGRESS_OPS_MAX 8

static const ftw_progress_ops_t *progress_ops[PROGRESS_OPS_MAX];
static int nprogress_ops;

void ftw_progress_register(const ftw_progress_ops_t *ops)
{
    if (nprogress_ops == PROGRESS_OPS_MAX)
        ftw_fatal("more than %d progress steps", PROGRESS_OPS_MAX);
    progress_ops[nprogress_ops++] = ops;
}

static inline int ops_active(const ftw_progress_ops_t *ops)
{
    return ops->active == NULL ||
           atomic_load_explicit(ops->active, memory_order_relaxed) != 0;
}

void ftw_progress_test(void)
{
    for (int i = 0; i < nprogress_ops; i++) {
        const ftw_progress_ops_t *ops = progress_ops[i];

        if (ops->on_test && ops_active(ops))
            ops->progress();
    }
}

void ftw_poll_idle(ftw_poll_t *p)
{
    p->spins++;
    ftw_xport_progress();   /* shm receivers wait for this process */
    if ((p->spins & 63) == 0) {
        ftw_detect_peek();
        ftw_grave_progress();
        if (ftw_unlikely(ftw_revoke_listening))
            ftw_revoke_poll();  /* notices whose bell came early */
    }
    for (int i = 0; i < nprogress_ops; i++) {
        const ftw_progress_ops_t *ops = progress_ops[i];

        if ((p->spins & (ops->every - 1)) == 0 && ops_active(ops))
            ops->progress();
    }
    ftw_poll_backoff(p->spins);
}
