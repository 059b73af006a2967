/* ftw-test: np=4 mode=ftwrap timeout=20 expect-failed=3 fate=3:signal:KILL */
/*
 * fail_finalize - MPI_Finalize returns after a process failed.
 *
 * Rank 3 leaves a barrier, sleeps 200 ms and SIGKILLs itself while ranks
 * 0-2 are blocked in MPI_Recv from it (FTW_ERR_PROC_FAIL_STOP within 5 s).
 * The survivors exchange checksummed messages for 0.3 s, ranks 1 and 2
 * send their verdicts to rank 0, which prints them as TAP, and then all
 * three call MPI_Finalize.  It must return MPI_SUCCESS within 5 s, and
 * MPI_Finalized must then say 1: rank 0 prints the TAP line about it, and
 * the plan, after MPI_Finalize (so the plan is missing if the process is
 * ended inside MPI_Finalize, by a watchdog say), and every survivor exits
 * 0 only if that held.  The runner checks that ranks 0-2
 * exited 0, rank 3 died by SIGKILL, and that nothing hung or was left
 * behind.
 */
#include <mpi.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftwrap.h"
#define MAXCHK 40            /* verdicts kept (tap.h) */
#include "tap.h"

#define NP 4
#define VICTIM 3
#define NSURV 3
#define BOUND 5.0            /* seconds a call may take after the kill */
#define KILL_DELAY_US 200000 /* victim: from the barrier to its death */
#define RING_SECONDS 0.3

#define TAG_DEAD 10   /* never sent */
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

int main(int argc, char **argv)
{
    int size, rc, ok, flag = 0;
    char b[4];
    double t0, t;

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
    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS)
        tap_diag("barrier failed");
    if (rank == VICTIM) {
        fflush(stdout);
        fflush(stderr);
        usleep(KILL_DELAY_US);
        raise(SIGKILL);
        _exit(99); /* not reached */
    }

    t0 = MPI_Wtime();
    rc = MPI_Recv(b, 4, MPI_BYTE, VICTIM, TAG_DEAD, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE);
    t = MPI_Wtime() - t0;
    chk_class(rc, FTW_ERR_PROC_FAIL_STOP, "MPI_Recv from 3 blocked as 3 dies");
    chk_time(t, "MPI_Recv from 3 blocked as 3 dies");
    ring(MPI_COMM_WORLD);
    plan_later = 1; /* after the line on MPI_Finalize */
    report();
    fflush(stdout);

    /* The verdict on MPI_Finalize: rank 0's last TAP line and the plan
     * (missing if the process ends inside MPI_Finalize), and every
     * survivor's exit status. */
    t0 = MPI_Wtime();
    rc = MPI_Finalize();
    t = MPI_Wtime() - t0;
    MPI_Finalized(&flag);
    ok = rc == MPI_SUCCESS && t < BOUND && flag;
    if (rank == 0) {
        tap_ok_local(ok, "rank 0: MPI_Finalize returned %d in %.3f s, "
                     "MPI_Finalized %d", rc, t, flag);
        tap_plan(tap_count_);
    }
    fflush(stdout);
    if (!ok) {
        fprintf(stderr, "# [rank %d] MPI_Finalize: returned %d in %.3f s, "
                "MPI_Finalized %d\n", rank, rc, t, flag);
        return 1;
    }
    return tap_status() || nchk_failed;
}
