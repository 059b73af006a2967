/*
 * MPI_Finalize that returns after failures.
 *
 * The survivors first meet in a barrier that tolerates failures (below),
 * so no process leaves while another still talks to it; then the detector
 * stops declaring failures (processes leaving now are not failures).
 * Without failures the native MPI_Finalize runs.  After failures: Open
 * MPI's finalize usually returns but sometimes hangs, so it runs under a
 * watchdog; MPICH's always hangs, so ftwrap tears down locally and lets
 * the process exit with the status the program gives.
 */
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "ftwrap.h"
#include "ft/comm.h"
#include "ft/ft.h"
#include "ft/op.h"
#include "util/config.h"
#include "util/log.h"
#include "util/stats.h"

#define TAG_ARRIVE 1
#define TAG_RELEASE 2

static int finalized_locally;

/* Lowest live world rank. */
static int lowest_live(void)
{
    int n = ftw_detect_world_size();

    for (int r = 0; r < n; r++)
        if (!ftw_detect_is_failed(r))
            return r;
    return -1;
}

/* Receive one empty message from src on ctl; 0 on success, -1 if src
 * failed first. */
static int recv_token(MPI_Comm ctl, int src, int tag)
{
    ftw_reqinfo_t info = { .comm = ctl, .peer = src, .peer2 = FTW_NO_PEER,
                           .kind = FTW_OP_RECV };
    MPI_Request req;
    char b;

    PMPI_Irecv(&b, 0, MPI_BYTE, src, tag, ctl, &req);
    return ftw_req_wait(&info, &req, MPI_STATUS_IGNORE, 1) == MPI_SUCCESS
               ? 0 : -1;
}

/* The coordinator (the lowest live rank) collects an arrival from every
 * live process and releases them all; if the coordinator fails, the next
 * lowest takes over and everyone arrives again there. */
static void survivor_barrier(MPI_Comm ctl, int me)
{
    int n = ftw_detect_world_size();
    char b = 0;

    for (;;) {
        int coord = lowest_live();

        if (coord == me) {
            for (int r = 0; r < n; r++)
                if (r != me && !ftw_detect_is_failed(r))
                    recv_token(ctl, r, TAG_ARRIVE);
            for (int r = 0; r < n; r++)
                if (r != me && !ftw_detect_is_failed(r))
                    PMPI_Send(&b, 0, MPI_BYTE, r, TAG_RELEASE, ctl);
            return;
        }
        PMPI_Send(&b, 0, MPI_BYTE, coord, TAG_ARRIVE, ctl);
        if (recv_token(ctl, coord, TAG_RELEASE) == 0)
            return;
    }
}

#if !defined(MPICH)
static void *watchdog(void *arg)
{
    struct timespec ts;
    double t = *(double *)arg;

    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    nanosleep(&ts, NULL);
    ftw_warn("MPI_Finalize did not return within %g s after process "
             "failures; ending the process with status 0", t);
    fflush(NULL);
    _exit(0);
    return NULL;
}
#endif

int ftw_finalize_run(MPI_Comm ctl, int me)
{
    int failures;

    ftw_inject(FTW_INJECT_FINALIZE);
    ftw_wrap_check();
    if (ctl != MPI_COMM_NULL)
        survivor_barrier(ctl, me);
    ftw_detect_quiesce();
    failures = atomic_load(&ftw_fail_epoch) != 0;
    if (!failures)
        return PMPI_Finalize();
#if defined(MPICH)
    ftw_info("process failures seen: MPI_Finalize ends locally (MPICH's "
             "own finalize would wait for the failed processes)");
    finalized_locally = 1;
    fflush(NULL);
    return MPI_SUCCESS;
#else
    {
        static double limit;
        pthread_t tid;

        limit = ftw_cfg.finalize_timeout;
        if (pthread_create(&tid, NULL, watchdog, &limit) == 0)
            pthread_detach(tid);
        return PMPI_Finalize();
    }
#endif
}

int ftw_finalized(int *flag)
{
    int rc = PMPI_Finalized(flag);

    if (rc == MPI_SUCCESS && finalized_locally)
        *flag = 1;
    return rc;
}
