/*
 * MPI_Finalize that returns after failures.
 *
 * The survivors first meet in a barrier that tolerates failures (below),
 * so no process leaves while another still talks to it; then the detector
 * stops declaring failures (processes leaving now are not failures).
 * Once failures are known the barrier waits at most FTW_FINALIZE_TIMEOUT
 * to hear from a live process or to send to it: a process killed while it
 * wrote into a receiver's shared-memory queue can leave that queue stuck
 * (seen with MPICH over UCX's posix/sysv transports: nothing from any
 * process reaches the receiver again, and once the queue is full the
 * MPI holds even a one-integer send to it), and the survivors must still
 * be able to leave.
 * Without failures the native MPI_Finalize runs.  After failures MPICH's
 * finalize always hangs and Open MPI's hangs now and then (seen: 1 run in
 * 13 of tests/fail_finalize on a loaded host), so on both ftwrap tears
 * down locally and lets the process exit with the status the program
 * gives; the launchers clean up what the native finalize would have.
 * The native finalize always runs under a watchdog, since a process may
 * also die after the barrier.
 */
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "ftwrap.h"
#include "core/comm.h"
#include "core/ctl.h"
#include "core/ft.h"
#include "op/op.h"
#include "util/config.h"
#include "util/log.h"
#include "util/record.h"
#include "util/stats.h"

#define TAG_ARRIVE FTW_CTL_TAG_ARRIVE
#define TAG_RELEASE FTW_CTL_TAG_RELEASE

static int finalized_locally;
static int finalize_failures;   /* the survivors' barrier saw failures */

/* Exit status when the native finalize hangs without any failure. */
#define FTW_FINALIZE_HUNG 70

/* Lowest live world rank. */
static int lowest_live(void)
{
    int n = ftw_detect_world_size();

    for (int r = 0; r < n; r++)
        if (!ftw_detect_is_failed(r))
            return r;
    return -1;
}

static int failures_known(void)
{
    return atomic_load(&ftw_fail_epoch) != 0;
}

/* recv_flag's outcomes besides 0 (received). */
#define FLAG_FAILED (-1)    /* src failed first */
#define FLAG_TIMEOUT (-2)   /* failures known, nothing came in time */

/* Whether a barrier step waiting in loop p must give up: once a failure
 * is known the step may wait until *deadline, which the first look after
 * that sets (FTW_FINALIZE_TIMEOUT from then), shared by the steps of one
 * barrier.  Looks at the clock once every 64 turns. */
static int past_deadline(const ftw_poll_t *p, double *deadline)
{
    double now;

    if ((p->spins & 63) != 0 || !failures_known())
        return 0;
    now = PMPI_Wtime();
    if (*deadline == 0) {
        *deadline = now + ftw_cfg.finalize_timeout;
        return 0;
    }
    return now > *deadline;
}

/* Receive one int from src on ctl.  Without failures it waits as long as
 * src takes; once a failure is known, until *deadline (set then). */
static int recv_flag(MPI_Comm ctl, int src, int tag, int *flag,
                     double *deadline)
{
    ftw_reqinfo_t info = { .comm = ctl, .peer = src, .peer2 = FTW_NO_PEER,
                           .kind = FTW_OP_RECV };
    MPI_Request req;
    ftw_poll_t p;

    PMPI_Irecv(flag, 1, MPI_INT, src, tag, ctl, &req);
    ftw_poll_init(&p);
    for (;;) {
        int done = 0, rc;

        if (PMPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return FLAG_FAILED;
        if (done)
            return 0;
        if (ftw_poll_changed(&p)) {
            rc = ftw_req_failcheck(&info, &req, MPI_STATUS_IGNORE, 1);
            if (rc != FTW_PENDING_CODE)
                return rc == MPI_SUCCESS ? 0 : FLAG_FAILED;
        }
        if (past_deadline(&p, deadline))
            break;
        ftw_poll_idle(&p);
    }
    PMPI_Cancel(&req);
    PMPI_Request_free(&req);
    ftw_warn("MPI_Finalize: no word from rank %d for %g s after process "
             "failures; leaving the survivors' barrier", src,
             ftw_cfg.finalize_timeout);
    return FLAG_TIMEOUT;
}

/* Send one int to dst on ctl.  An eager message, but one the MPI holds
 * while the receiver's queue is full, and a queue a dying writer left
 * stuck (see the top) fills and stays full: once a failure is known the
 * send is given up at *deadline (set then), as recv_flag gives up its
 * receive, and when dst fails.  0 if sent. */
static int send_flag(MPI_Comm ctl, int dst, int tag, int flag,
                     double *deadline)
{
    int *msg = malloc(sizeof(*msg));
    MPI_Request req;
    ftw_poll_t p;

    if (msg == NULL)
        return PMPI_Send(&flag, 1, MPI_INT, dst, tag, ctl) == MPI_SUCCESS ?
               0 : FLAG_FAILED;
    *msg = flag;
    if (PMPI_Isend(msg, 1, MPI_INT, dst, tag, ctl, &req) != MPI_SUCCESS) {
        free(msg);
        return FLAG_FAILED;
    }
    ftw_poll_init(&p);
    for (;;) {
        int done = 0;

        if (PMPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return FLAG_FAILED;     /* msg stays: the MPI may hold it */
        if (done) {
            free(msg);
            return 0;
        }
        if (ftw_detect_is_failed(dst))
            break;
        if (past_deadline(&p, deadline))
            break;
        ftw_poll_idle(&p);
    }
    /* Given up: the MPI may still send msg, so it stays allocated. */
    PMPI_Request_free(&req);
    if (ftw_detect_is_failed(dst))
        return FLAG_FAILED;
    ftw_warn("MPI_Finalize: rank %d took no word for %g s after process "
             "failures; leaving the survivors' barrier", dst,
             ftw_cfg.finalize_timeout);
    return FLAG_TIMEOUT;
}

/* The coordinator (the lowest live rank) collects an arrival from every
 * live process and releases them all; if the coordinator fails, the next
 * lowest takes over and everyone arrives again there.  Each arrival says
 * whether its sender knows of a failure, and the release passes the OR
 * on: every survivor leaves knowing whether anyone saw a failure, even if
 * its own detector has not caught up yet.  Returns that OR.  A live
 * process silent past the deadline (see the top) ends the wait: the
 * barrier returns 1, and this process ends locally (a coordinator first
 * sends the release to every live process, so those that arrived need
 * not wait for their own deadline). */
static int survivor_barrier(MPI_Comm ctl, int me)
{
    int n = ftw_detect_world_size();
    double deadline = 0;

    for (;;) {
        int coord = lowest_live();
        int any = failures_known(), flag = 0, rc;

        if (coord == me) {
            for (int r = 0; r < n; r++) {
                if (r == me || ftw_detect_is_failed(r))
                    continue;
                rc = recv_flag(ctl, r, TAG_ARRIVE, &flag, &deadline);
                any |= rc != 0 || flag;
                if (rc == FLAG_TIMEOUT)
                    break;      /* release those that came */
            }
            any |= failures_known();
            for (int r = 0; r < n; r++)
                if (r != me && !ftw_detect_is_failed(r))
                    send_flag(ctl, r, TAG_RELEASE, any, &deadline);
            return any;
        }
        if (send_flag(ctl, coord, TAG_ARRIVE, any, &deadline) ==
            FLAG_TIMEOUT)
            return 1;
        rc = recv_flag(ctl, coord, TAG_RELEASE, &flag, &deadline);
        if (rc == FLAG_TIMEOUT)
            return 1;
        if (rc == 0)
            return flag || failures_known();
    }
}

/* The native finalize may hang on a process that died after the barrier:
 * a watchdog ends the process if it takes longer than FTW_FINALIZE_TIMEOUT
 * and is called off as soon as it returns. */
static pthread_mutex_t wd_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wd_cond = PTHREAD_COND_INITIALIZER;
static int wd_done;

static void *watchdog(void *arg)
{
    double t = *(double *)arg;
    struct timespec ts;
    int done;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)t;
    ts.tv_nsec += (long)((t - (double)(time_t)t) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&wd_lock);
    while (!wd_done &&
           pthread_cond_timedwait(&wd_cond, &wd_lock, &ts) == 0)
        ;
    done = wd_done;
    pthread_mutex_unlock(&wd_lock);
    if (done)
        return NULL;
    fflush(NULL);
    if (atomic_load(&ftw_fail_epoch) != 0 || finalize_failures) {
        ftw_warn("MPI_Finalize did not return within %g s after process "
                 "failures; ending the process with status 0", t);
        _exit(0);
    }
    /* Without any failure the hang is the MPI's; say so in the status. */
    ftw_error("MPI_Finalize did not return within %g s although no "
              "process failed; ending the process with status %d", t,
              FTW_FINALIZE_HUNG);
    _exit(FTW_FINALIZE_HUNG);
    return NULL;
}

static int finalize_watched(void)
{
    static double limit;
    pthread_t tid;
    int started, rc;

    limit = ftw_cfg.finalize_timeout;
    started = pthread_create(&tid, NULL, watchdog, &limit) == 0;
    rc = PMPI_Finalize();
    if (started) {
        pthread_mutex_lock(&wd_lock);
        wd_done = 1;
        pthread_cond_signal(&wd_cond);
        pthread_mutex_unlock(&wd_lock);
        pthread_join(tid, NULL);
    }
    return rc;
}

/* The lowest live process tells ftwrun (FTW_REPORT_TO, set by
 * ftw-supervise: "addr[,addr...]:port") which ranks the job lost, one
 * "failed <rank>" record per connection, so that ftwrun need not wait
 * for a launcher that waits for a lost host. */
static void report_failed(int me)
{
    const char *spec = getenv("FTW_REPORT_TO");
    int n = ftw_detect_world_size();

    if (spec == NULL || me != lowest_live())
        return;
    for (int r = 0; r < n; r++) {
        char line[32];

        if (!ftw_detect_is_failed(r))
            continue;
        snprintf(line, sizeof(line), "failed %d lost\n", r);
        ftw_record_send(spec, line);
    }
}

int ftw_finalize_run(MPI_Comm ctl, int me)
{
    int failures = failures_known();

    ftw_inject(FTW_INJECT_FINALIZE);
    ftw_wrap_check();
    if (ctl != MPI_COMM_NULL)
        failures = survivor_barrier(ctl, me);
    finalize_failures = failures;
    ftw_detect_quiesce();
    if (failures) {
        report_failed(me);
        ftw_info("process failures seen: MPI_Finalize ends locally (the "
                 "MPI's own finalize may wait for the failed processes)");
        finalized_locally = 1;
        fflush(NULL);
        return MPI_SUCCESS;
    }
    return finalize_watched();
}

int ftw_finalized(int *flag)
{
    int rc = PMPI_Finalized(flag);

    if (rc == MPI_SUCCESS && finalized_locally)
        *flag = 1;
    return rc;
}
