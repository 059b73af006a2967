/*
 * SIGUSR1 as a hint: MPICH's hydra signals the ranks when a peer dies.
 * The handler only wakes the detector thread (through its eventfd), which
 * then re-checks every pidfd and sends its heartbeat at once.
 */
#define _GNU_SOURCE
#include "detect/detect_int.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"

static struct sigaction hint_old;
static int hint_installed;

/* Async-signal-safe: one write to the eventfd, then the previous
 * handler.  The previous action is chained only if it was a handler:
 * SIG_DFL would terminate the process, which is what ftwrap exists to
 * prevent, and SIG_IGN is nothing to do. */
static void hint_handler(int sig, siginfo_t *info, void *ctx)
{
    int saved_errno = errno;
    uint64_t one = 1;

    if (write(ftw_det.wakefd, &one, sizeof(one)) < 0) {
        /* The counter is saturated: the thread is awake anyway. */
    }
    errno = saved_errno;
    if (hint_old.sa_flags & SA_SIGINFO) {
        if (hint_old.sa_sigaction)
            hint_old.sa_sigaction(sig, info, ctx);
    } else if (hint_old.sa_handler != SIG_DFL &&
               hint_old.sa_handler != SIG_IGN) {
        hint_old.sa_handler(sig);
    }
}

ftw_status_t ftw_det_hint_install(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = hint_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, &hint_old) < 0) {
        ftw_error("sigaction(SIGUSR1): %m");
        return FTW_ST_IO_ERROR;
    }
    hint_installed = 1;
    return FTW_OK;
}

void ftw_det_hint_restore(void)
{
    if (!hint_installed)
        return;
    if (sigaction(SIGUSR1, &hint_old, NULL) < 0)
        ftw_warn("sigaction(SIGUSR1) restore: %m");
    hint_installed = 0;
}
