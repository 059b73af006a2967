/*
 * The detector thread: one epoll loop over the pidfds of local peers, the
 * heartbeat socket and the wake eventfd (SIGUSR1 hints, stop).  It makes
 * no MPI calls and receives no signals.
 */
#define _GNU_SOURCE
#include "detect/detect_int.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "util/config.h"
#include "util/log.h"

#define FTW_DET_MAX_EVENTS 16

/* The wake eventfd fired: stop, or a hint that a peer died. */
static void thread_wake(void)
{
    uint64_t count;

    if (read(ftw_det.wakefd, &count, sizeof(count)) < 0 && errno != EAGAIN)
        ftw_warn_sparse("read(eventfd): %m");
    if (atomic_load(&ftw_det.stop))
        return;
    ftw_det_pidfd_recheck();
    ftw_det_hb_send();
}

static void thread_dispatch(const struct epoll_event *ev)
{
    int kind = (int)(ev->data.u64 >> 32);
    int rank = (int)(uint32_t)ev->data.u64;

    switch (kind) {
    case FTW_EV_WAKE:
        thread_wake();
        break;
    case FTW_EV_SOCK:
        ftw_det_sock_drain();
        break;
    case FTW_EV_EARLY:
        ftw_det_early_event();
        break;
    case FTW_EV_PIDFD:
        if (ftw_det.pidfds[rank] >= 0)
            ftw_det_pidfd_event(rank);
        break;
    case FTW_EV_FOREIGN:
        ftw_det_foreign_event(rank);
        break;
    }
}

/* Milliseconds until the next heartbeat duty, -1 without heartbeats. */
static int thread_wait_ms(double now)
{
    double left;

    if (!ftw_det.use_hb)
        return -1;
    left = ftw_det_hb_deadline() - now;
    return left <= 0 ? 0 : (int)(left * 1e3) + 1;
}

/* Woke more than hb_timeout/2 later than asked: this process was stopped
 * or starved, so the predecessor's silence proves nothing.  Pending
 * datagrams come first: a notice naming this process ends it. */
static void thread_stalled(double late, double now)
{
    ftw_debug("detector woke %.3f s late; not judging rank %d this round",
              late, ftw_det.pred);
    ftw_det_sock_drain();
    ftw_det_hb_reset_pred(now);
}

static void *thread_main(void *arg)
{
    struct epoll_event evs[FTW_DET_MAX_EVENTS];
    double now = ftw_det_now();

    ftw_det_robust_arm();
    for (int r = 0; r < ftw_det.size; r++)
        ftw_det.heard[r] = now;
    ftw_det_hb_ring_update(now);
    ftw_det_hb_send();
    while (!atomic_load(&ftw_det.stop)) {
        int ms = thread_wait_ms(now);
        double asked = now + (ms < 0 ? 0 : ms * 1e-3);
        int n = epoll_wait(ftw_det.epfd, evs, FTW_DET_MAX_EVENTS, ms);

        if (n < 0 && errno != EINTR)
            ftw_fatal("epoll_wait: %m");
        now = ftw_det_now();
        if (ftw_det.use_hb && now - asked > ftw_cfg.hb_timeout / 2)
            thread_stalled(now - asked, now);
        for (int i = 0; i < n; i++)
            thread_dispatch(&evs[i]);
        now = ftw_det_now();
        if (ftw_det.use_hb)
            ftw_det_hb_check(now);
    }
    ftw_det_robust_disarm();
    return NULL;
}

/* Start the thread with every signal blocked: it inherits the mask. */
ftw_status_t ftw_det_thread_start(void)
{
    sigset_t all, old;
    int rc;

    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&ftw_det.thread, NULL, thread_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        errno = rc;
        ftw_error("pthread_create: %m");
        return FTW_ST_IO_ERROR;
    }
    ftw_det.thread_started = 1;
    return FTW_OK;
}

void ftw_det_thread_stop(void)
{
    uint64_t one = 1;

    if (!ftw_det.thread_started)
        return;
    atomic_store(&ftw_det.stop, 1);
    if (write(ftw_det.wakefd, &one, sizeof(one)) < 0)
        ftw_warn("write(eventfd): %m");
    pthread_join(ftw_det.thread, NULL);
    ftw_det.thread_started = 0;
}
