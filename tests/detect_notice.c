/* ftw-test: np=16 mode=ftwrap timeout=90 link=ftwrap expect-failed=5 fate=5:signal:KILL env=FTW_DETECT=heartbeat env=FTW_HB_PERIOD=0.1 env=FTW_HB_TIMEOUT=1.0 */
/*
 * detect_notice - a failure notice reaches every survivor along the
 * detector's tree, in bounded time and with O(n) datagrams in all
 * (FTW_DETECT=heartbeat: no pidfd, even on one host; period 0.1 s,
 * timeout 1 s).
 *
 * 16 ranks.  Rank 0 picks a kill time 0.3 s ahead and broadcasts it; the
 * victims (VICTIM_A, and VICTIM_B DELAY_B_US later if the including test
 * names one) SIGKILL themselves then.  Every survivor blocks in MPI_Recv
 * from each victim in turn: FTW_ERR_PROC_FAIL_STOP, and the return comes
 * at most LEARN_BOUND s after that victim's death (wall clock; one host).
 * The survivors then meet (point to point at the lowest survivor), wait
 * SETTLE s for notices still in flight, and send the lowest survivor
 * their counters (FTW_Stat_get): the failure notices they sent in all must
 * be at most NOTICES_PER_FAILURE * n per failure (a notice sent to every
 * process by every process would be about 2 n^2), the acknowledgements
 * as many.  Then they pass checksummed messages (64 B, 1 MiB) around
 * their ring for 0.5 s and report (survivors.h).
 *
 * detect_adjacent.c kills two ring neighbours at once (the watcher of the
 * second is the first); detect_relay.c kills an inner node of the first
 * victim's tree 0.3 s after it, so that the notice finds it dead but not
 * yet known dead.
 */
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ftwrap.h"
#include "tap.h"

#define NP 16
#ifndef VICTIM_A
#define VICTIM_A 5
#define VICTIM_B (-1)
#define DELAY_B_US 0
#define LEARN_BOUND 2.0         /* hb_timeout + 1 s */
#endif
#define VICTIM VICTIM_A
#define NSURV_MAX NP
#define BOUND 5.0
#define AT_ONCE 1.0
#define KILL_DELAY_US 0
#define KILL_AHEAD 0.3          /* s from rank 0's pick to the kill */
#define SETTLE 1.5              /* s for notices still in flight */
#define NOTICES_PER_FAILURE 2   /* notices sent per failure, over n */
#define RING_SECONDS 0.5

#define TAG_DEAD 10             /* never sent */
#define TAG_MEET 11
#define TAG_GO 12
#define TAG_COUNT 13
#define TAG_CTRL 14
#define TAG_RING 15

#include "survivors.h"

static const char *const keys[] = { "det_fail_sent", "det_fail_acks",
                                    "det_fail_recv", "det_fail_resent" };
#define NKEYS 4

static double wall(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A signal (MPICH's launcher sends SIGUSR1 when a rank dies) cuts a
 * sleep short: sleep again. */
static void sleep_until(double t)
{
    double left;

    while ((left = t - wall()) > 0)
        usleep((useconds_t)(left * 1e6));
}

static int is_victim(int r)
{
    return r == VICTIM_A || r == VICTIM_B;
}

/* Blocked in MPI_Recv from v until v's failure is known; returns the
 * delay from v's death. */
static double learn(int v, double died)
{
    char b[4];
    int rc;
    double t;

    rc = MPI_Recv(b, sizeof b, MPI_BYTE, v, TAG_DEAD, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE);
    t = wall() - died;
    chk_class(rc, FTW_ERR_PROC_FAIL_STOP, "MPI_Recv from the victim");
    chk(t < LEARN_BOUND, "rank %d's failure known %.3f s after its death "
        "(bound %.1f s)", v, t, LEARN_BOUND);
    return t;
}

/* The survivors pass checksummed messages around their ring (tap_ring);
 * surv[0] decides when to stop. */
static void ring(const int *surv, int nsurv, int me)
{
    long n;

    step = "survivors' ring";
    n = tap_ring(MPI_COMM_WORLD, surv, nsurv, me, RING_SECONDS, TAG_CTRL,
                 TAG_RING);
    chk(n > 0, "survivors' ring: %ld rounds of 64 B / 1 MiB intact", n);
}

/* Everyone at surv[0], then on together. */
static void meet(const int *surv, int nsurv, int me)
{
    int x = 0;

    step = "meeting";
    if (me == 0) {
        for (int k = 1; k < nsurv; k++)
            MPI_Recv(&x, 1, MPI_INT, surv[k], TAG_MEET, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        for (int k = 1; k < nsurv; k++)
            MPI_Send(&x, 1, MPI_INT, surv[k], TAG_GO, MPI_COMM_WORLD);
    } else {
        MPI_Send(&x, 1, MPI_INT, surv[0], TAG_MEET, MPI_COMM_WORLD);
        MPI_Recv(&x, 1, MPI_INT, surv[0], TAG_GO, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    }
}

/* The notice counters of every survivor, summed at surv[0]. */
static void counters(const int *surv, int nsurv, int me, int nfail,
                     const double *learned)
{
    unsigned long long mine[NKEYS + 2], sum[NKEYS] = {0}, maxsent = 0;
    double last[2] = {0, 0};

    step = "counters";
    for (int i = 0; i < NKEYS; i++)
        chk(FTW_Stat_get(keys[i], &mine[i]) == MPI_SUCCESS,
            "FTW_Stat_get(\"%s\")", keys[i]);
    /* The learning times, in microseconds, ride along. */
    mine[NKEYS] = (unsigned long long)(learned[0] * 1e6);
    mine[NKEYS + 1] = (unsigned long long)(learned[1] * 1e6);
    if (me != 0) {
        MPI_Send(mine, NKEYS + 2, MPI_UNSIGNED_LONG_LONG, surv[0], TAG_COUNT,
                 MPI_COMM_WORLD);
        return;
    }
    for (int k = 0; k < nsurv; k++) {
        unsigned long long theirs[NKEYS + 2];

        if (k == 0)
            memcpy(theirs, mine, sizeof theirs);
        else if (MPI_Recv(theirs, NKEYS + 2, MPI_UNSIGNED_LONG_LONG, surv[k],
                          TAG_COUNT, MPI_COMM_WORLD, MPI_STATUS_IGNORE))
            chk(0, "counters of rank %d", surv[k]);
        for (int i = 0; i < NKEYS; i++)
            sum[i] += theirs[i];
        if (theirs[0] > maxsent)
            maxsent = theirs[0];
        for (int j = 0; j < 2; j++)
            if (theirs[NKEYS + j] * 1e-6 > last[j])
                last[j] = theirs[NKEYS + j] * 1e-6;
    }
    tap_diag("%d failure(s), %d survivors: notices sent %llu (%llu sent "
             "again), received %llu, acknowledgements %llu; most sent by one "
             "process %llu; last survivor knew after %.3f s / %.3f s",
             nfail, nsurv, sum[0], sum[3], sum[2], sum[1], maxsent, last[0],
             last[1]);
    chk(sum[0] <= (unsigned long long)(NOTICES_PER_FAILURE * NP * nfail),
        "failure notices sent in all: %llu, at most %d per failure (%d n)",
        sum[0], NOTICES_PER_FAILURE * NP, NOTICES_PER_FAILURE);
    chk(sum[0] >= (unsigned long long)(nsurv - nfail),
        "failure notices sent in all: %llu, at least one per survivor",
        sum[0]);
    chk(sum[1] <= (unsigned long long)(NOTICES_PER_FAILURE * NP * nfail),
        "acknowledgements sent in all: %llu, at most %d per failure",
        sum[1], NOTICES_PER_FAILURE * NP);
}

int main(int argc, char **argv)
{
    int surv[NSURV_MAX], nsurv = 0, me = -1, nfail = VICTIM_B >= 0 ? 2 : 1;
    double t_kill = 0, learned[2] = {0, 0};

    if (!setup(&argc, &argv))
        return 0;
    for (int r = 0; r < NP; r++)
        if (!is_victim(r)) {
            if (r == rank)
                me = nsurv;
            surv[nsurv++] = r;
        }
    if (rank == 0)
        t_kill = wall() + KILL_AHEAD;
    MPI_Bcast(&t_kill, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS)
        tap_diag("barrier before the kill failed");
    if (rank == VICTIM_A || rank == VICTIM_B) {
        sleep_until(t_kill + (rank == VICTIM_B ? DELAY_B_US * 1e-6 : 0));
        victim();
    }
    watchdog_start(40.0);

    step = "learning of the first victim";
    learned[0] = learn(VICTIM_A, t_kill);
    if (VICTIM_B >= 0) {
        step = "learning of the second victim";
        learned[1] = learn(VICTIM_B, t_kill + DELAY_B_US * 1e-6);
    }
    meet(surv, nsurv, me);
    sleep_until(wall() + SETTLE);
    counters(surv, nsurv, me, nfail, learned);
    ring(surv, nsurv, me);
    return finish(surv, nsurv);
}
