/* ftw-test: np=4 mode=ftwrap timeout=20 expect-failed=2,3 fate=2:signal:KILL fate=3:exit:75 env=FTW_DETECT=heartbeat env=FTW_HB_PERIOD=0.05 env=FTW_HB_TIMEOUT=0.5 */
/*
 * fail_heartbeat - failures found by heartbeats alone (FTW_DETECT=heartbeat,
 * period 50 ms, timeout 0.5 s: no pidfd, even on one host).
 *
 * Phase 1, a stopped process: rank 0 SIGSTOPs rank 3 (pids were exchanged
 * at the start) while rank 3 waits in MPI_Recv; ranks 0 and 1 are
 * blocked in MPI_Recv from 3 and must get FTW_ERR_PROC_FAIL_STOP within
 * 5 s.  Rank 0 then SIGCONTs rank 3, which must learn that it was declared
 * failed and exit on its own with status 75: rank 0 checks that the
 * process is gone within 5 s, the runner that the report says "exit:75".
 *
 * Phase 2, a killed process: rank 0 tells rank 2 to go; rank 2 sleeps
 * 200 ms and SIGKILLs itself while ranks 0 and 1 are blocked in MPI_Recv
 * from it: FTW_ERR_PROC_FAIL_STOP within 5 s.  Sends to both dead ranks
 * fail with the same class.
 *
 * Ranks 0 and 1 then exchange checksummed messages (64 B, 1 MiB) for
 * 0.5 s; rank 1 sends its verdicts to rank 0, which prints TAP (plan at
 * the end); both end with MPI_Finalize.
 */
#include <errno.h>
#include <mpi.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "ftwrap.h"
#define MAXCHK 40            /* verdicts kept (tap.h) */
#include "tap.h"

#define NP 4
#define STOPPED 3
#define KILLED 2
#define NSURV 2
#define BOUND 5.0            /* seconds a call may take after the fault */
#define KILL_DELAY_US 200000 /* rank 2: from the go to its death */
#define STOP_DELAY_US 100000 /* rank 0: from the barrier to the SIGSTOP */
#define RING_SECONDS 0.5

#define TAG_DEAD 10   /* never sent */
#define TAG_GO 11
#define TAG_CTRL 12
#define TAG_RING 13
#define TAG_RESULT 14

/* ---- checks, reported to rank 0 ---------------------------------------- */

static int rank;

/* rc must be an error of class want. */
static inline int chk_class(int rc, int want, const char *what)
{
    int cls = rc == MPI_SUCCESS ? MPI_SUCCESS : class_of(rc);

    return chk(rc != MPI_SUCCESS && cls == want, "%s: %s (got %s)", what,
               class_name(want), class_name(cls));
}

static inline int chk_time(double t, const char *what)
{
    return chk(t < BOUND, "%s: returned in %.3f s (bound %.0f s)", what, t,
               BOUND);
}

/* Set when rank 0 prints more TAP lines, and the plan, after report(). */
static int plan_later;

/* Ranks 1..NSURV-1 send their checks to rank 0, which prints them all. */
static void report(void)
{
    if (rank != 0) {
        if (MPI_Send(&nchk, 1, MPI_INT, 0, TAG_RESULT, MPI_COMM_WORLD) ||
            MPI_Send(chks, nchk * (int)sizeof(chk_t), MPI_BYTE, 0, TAG_RESULT,
                     MPI_COMM_WORLD))
            tap_diag("cannot send my verdicts to rank 0");
        return;
    }
    for (int i = 0; i < nchk; i++)
        tap_ok_local(chks[i].ok, "rank 0: %s", chks[i].what);
    for (int r = 1; r < NSURV; r++) {
        chk_t theirs[MAXCHK];
        int n = 0, rc;

        rc = MPI_Recv(&n, 1, MPI_INT, r, TAG_RESULT, MPI_COMM_WORLD,
                      MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS && (n < 0 || n > MAXCHK))
            rc = MPI_ERR_COUNT;
        if (rc == MPI_SUCCESS)
            rc = MPI_Recv(theirs, n * (int)sizeof(chk_t), MPI_BYTE, r,
                          TAG_RESULT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (!tap_ok_local(rc == MPI_SUCCESS && n > 0,
                          "rank %d reported %d verdicts", r, n))
            continue;
        for (int i = 0; i < n; i++) {
            theirs[i].what[sizeof theirs[i].what - 1] = '\0';
            tap_ok_local(theirs[i].ok, "rank %d: %s", r, theirs[i].what);
        }
    }
    if (!plan_later)
        tap_plan(tap_count_);
}

/* ---- the survivors' ring ------------------------------------------------ */

/* Ranks 0..NSURV-1 pass checksummed messages around on comm (tap_ring);
 * records one check. */
static void ring(MPI_Comm comm)
{
    long n = tap_ring(comm, NULL, NSURV, rank, RING_SECONDS, TAG_CTRL,
                      TAG_RING);

    chk(n > 0, "survivors' ring: %ld rounds of 64 B / 1 MiB intact", n);
}
/* ---- the test ------------------------------------------------------------ */

/* 1 if process pid is gone or a zombie (ended, not yet reaped). */
static int ended(pid_t pid)
{
    char path[64], buf[512], *p;
    FILE *f;
    size_t n;

    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (f == NULL)
        return errno == ENOENT;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')');
    return p != NULL && (p[2] == 'Z' || p[2] == 'X');
}

/* Blocked in MPI_Recv from peer while it fails. */
static void recv_from_failing(int peer, const char *how)
{
    char b[4];
    double t0 = MPI_Wtime(), t;
    int rc;

    rc = MPI_Recv(b, 4, MPI_BYTE, peer, TAG_DEAD, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE);
    t = MPI_Wtime() - t0;
    chk_class(rc, FTW_ERR_PROC_FAIL_STOP, how);
    chk_time(t, how);
}

int main(int argc, char **argv)
{
    int size, rc, mypid, pids[NP], go = 1;
    char b[4] = {0};

    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != NP) {
        if (rank == 0)
            printf("1..0 # SKIP needs %d ranks\n", NP);
        MPI_Finalize();
        return 0;
    }
    mypid = (int)getpid();
    MPI_Gather(&mypid, 1, MPI_INT, pids, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS)
        tap_diag("barrier failed");

    if (rank == STOPPED) {
        /* Stopped in here; declared failed, it must exit 75 once
         * continued.  Anything else is reported as a wrong fate. */
        rc = MPI_Recv(b, 4, MPI_BYTE, 0, TAG_DEAD, MPI_COMM_WORLD,
                      MPI_STATUS_IGNORE);
        tap_diag("rank 3: MPI_Recv returned %s after SIGCONT instead of the "
                 "process exiting with status 75", class_name(class_of(rc)));
        _exit(1);
    }
    if (rank == KILLED) {
        rc = MPI_Recv(&go, 1, MPI_INT, 0, TAG_GO, MPI_COMM_WORLD,
                      MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            tap_diag("rank 2: go from rank 0: %s", class_name(class_of(rc)));
        fflush(stdout);
        fflush(stderr);
        usleep(KILL_DELAY_US);
        raise(SIGKILL);
        _exit(99); /* not reached */
    }

    /* Phase 1: rank 3 stopped. */
    if (rank == 0) {
        usleep(STOP_DELAY_US);
        chk(kill(pids[STOPPED], SIGSTOP) == 0, "SIGSTOP rank 3 (pid %d)",
            pids[STOPPED]);
    }
    recv_from_failing(STOPPED, "MPI_Recv from 3 blocked as 3 is stopped");
    if (rank == 0) {
        double t0 = MPI_Wtime();

        chk(kill(pids[STOPPED], SIGCONT) == 0, "SIGCONT rank 3");
        while (!ended(pids[STOPPED]) && MPI_Wtime() - t0 < BOUND)
            usleep(10000);
        chk(ended(pids[STOPPED]), "rank 3 ended by itself after SIGCONT "
            "(in %.3f s; the runner checks its status is 75)",
            MPI_Wtime() - t0);
    }

    /* Phase 2: rank 2 killed. */
    if (rank == 0)
        MPI_Send(&go, 1, MPI_INT, KILLED, TAG_GO, MPI_COMM_WORLD);
    recv_from_failing(KILLED, "MPI_Recv from 2 blocked as 2 dies");
    rc = MPI_Send(b, 4, MPI_BYTE, KILLED, TAG_DEAD, MPI_COMM_WORLD);
    chk_class(rc, FTW_ERR_PROC_FAIL_STOP, "MPI_Send to dead 2");
    rc = MPI_Send(b, 4, MPI_BYTE, STOPPED, TAG_DEAD, MPI_COMM_WORLD);
    chk_class(rc, FTW_ERR_PROC_FAIL_STOP, "MPI_Send to excluded 3");

    ring(MPI_COMM_WORLD);
    report();
    fflush(stdout);
    rc = MPI_Finalize();
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "# [rank %d] MPI_Finalize returned %d\n", rank, rc);
        return 1;
    }
    return tap_status() || nchk_failed;
}
