/* ftw-test: np=4 mode=ftwrap timeout=20 expect-failed=3 fate=3:signal:KILL */
/*
 * fail_errhandler - error handlers when a peer fails.
 *
 * Every survivor (ranks 0-2) has two duplicates of MPI_COMM_WORLD: cu with
 * a handler made by MPI_Comm_create_errhandler, which records each call
 * (communicator, code), and cr with MPI_ERRORS_RETURN.  Rank 3 leaves a
 * barrier, sleeps 200 ms and SIGKILLs itself while the survivors are
 * blocked in MPI_Recv from it on cu.  Each survivor asserts:
 *   - that MPI_Recv returns, within 5 s, a code of class
 *     FTW_ERR_PROC_FAIL_STOP, after calling the handler exactly once with
 *     that same code and with cu;
 *   - MPI_Recv from 3 on cr returns FTW_ERR_PROC_FAIL_STOP and calls no
 *     handler;
 *   - MPI_Send to 3 on cu calls the handler once more; MPI_Irecv from 3 on
 *     cu followed by MPI_Wait calls it exactly once for the pair, with the
 *     code the failing call returns;
 *   - MPI_Waitall on a receive from 3 and a completed send returns
 *     MPI_ERR_IN_STATUS and calls the handler once, with the failed
 *     request's own code (FTW_ERR_PROC_FAIL_STOP, as its status says);
 *   - a checksummed ring on cu among the survivors (0.5 s) succeeds
 *     without calling the handler.
 * Ranks 1 and 2 send their verdicts to rank 0, which prints TAP (plan at
 * the end); all end with MPI_Finalize.
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
#define RING_SECONDS 0.5

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

/* What the user's handler saw. */
static int eh_calls;
static int eh_code = MPI_SUCCESS;
static MPI_Comm eh_comm = MPI_COMM_NULL;

static void record(MPI_Comm *comm, int *code, ...)
{
    eh_calls++;
    eh_code = *code;
    eh_comm = *comm;
}

/* The handler was called exactly once since calls0, with cu and code rc;
 * rc is of class FTW_ERR_PROC_FAIL_STOP. */
static void chk_handled(const char *what, int rc, int calls0, MPI_Comm cu)
{
    chk_class(rc, FTW_ERR_PROC_FAIL_STOP, what);
    chk(eh_calls - calls0 == 1, "%s: user handler called once (got %d)",
        what, eh_calls - calls0);
    chk(eh_code == rc && eh_comm == cu,
        "%s: handler saw the code returned and cu (%s)", what,
        eh_code != rc ? "other code" : eh_comm != cu ? "other comm" : "yes");
}

int main(int argc, char **argv)
{
    MPI_Comm cu, cr;
    MPI_Errhandler eh;
    MPI_Request req;
    char small[16] = {0};
    int size, rc, calls0;
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
    MPI_Comm_dup(MPI_COMM_WORLD, &cu);
    MPI_Comm_dup(MPI_COMM_WORLD, &cr);
    MPI_Comm_create_errhandler(record, &eh);
    MPI_Comm_set_errhandler(cu, eh);
    MPI_Errhandler_free(&eh);
    MPI_Comm_set_errhandler(cr, MPI_ERRORS_RETURN);

    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS)
        tap_diag("barrier failed");
    if (rank == VICTIM) {
        fflush(stdout);
        fflush(stderr);
        usleep(KILL_DELAY_US);
        raise(SIGKILL);
        _exit(99); /* not reached */
    }

    /* Blocked in MPI_Recv on cu while rank 3 dies. */
    calls0 = eh_calls;
    t0 = MPI_Wtime();
    rc = MPI_Recv(small, 4, MPI_BYTE, VICTIM, TAG_DEAD, cu,
                  MPI_STATUS_IGNORE);
    t = MPI_Wtime() - t0;
    chk_handled("MPI_Recv from 3 on cu blocked as 3 dies", rc, calls0, cu);
    chk_time(t, "MPI_Recv from 3 on cu blocked as 3 dies");

    /* MPI_ERRORS_RETURN: the code, no call. */
    calls0 = eh_calls;
    rc = MPI_Recv(small, 4, MPI_BYTE, VICTIM, TAG_DEAD, cr,
                  MPI_STATUS_IGNORE);
    chk_class(rc, FTW_ERR_PROC_FAIL_STOP,
              "MPI_Recv from dead 3 on cr (MPI_ERRORS_RETURN)");
    chk(eh_calls == calls0, "MPI_Recv from dead 3 on cr: no handler called "
        "(got %d calls)", eh_calls - calls0);

    /* Another failing call on cu: one more call. */
    calls0 = eh_calls;
    rc = MPI_Send(small, 4, MPI_BYTE, VICTIM, TAG_DEAD, cu);
    chk_handled("MPI_Send to dead 3 on cu", rc, calls0, cu);

    /* Irecv + Wait: one call for the pair, by whichever call fails. */
    calls0 = eh_calls;
    req = MPI_REQUEST_NULL;
    rc = MPI_Irecv(small, 4, MPI_BYTE, VICTIM, TAG_DEAD, cu, &req);
    if (rc == MPI_SUCCESS) {
        chk(eh_calls == calls0, "MPI_Irecv from dead 3 on cu: posted without "
            "a handler call (got %d calls)", eh_calls - calls0);
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    chk_handled("MPI_Irecv+MPI_Wait from dead 3 on cu", rc, calls0, cu);

    /* Waitall with one request to the dead and one that completes:
     * MPI_ERR_IN_STATUS, and one handler call with the failed request's
     * own error (a ULFM handler checks for MPIX_ERR_PROC_FAILED). */
    {
        MPI_Request two[2];
        MPI_Status sts[2];
        int me = 0, back = -1;

        calls0 = eh_calls;
        MPI_Irecv(small, 4, MPI_BYTE, VICTIM, TAG_DEAD, cu, &two[0]);
        MPI_Isend(&me, 1, MPI_INT, MPI_PROC_NULL, 0, cu, &two[1]);
        rc = MPI_Waitall(2, two, sts);
        back = sts[0].MPI_ERROR;
        chk(rc == MPI_ERR_IN_STATUS && eh_calls - calls0 == 1 &&
            class_of(eh_code) == FTW_ERR_PROC_FAIL_STOP && eh_code == back &&
            eh_comm == cu && sts[1].MPI_ERROR == MPI_SUCCESS,
            "MPI_Waitall with a request to dead 3 on cu: MPI_ERR_IN_STATUS "
            "(got %s), one handler call (got %d) with that request's "
            "FTW_ERR_PROC_FAIL_STOP (got %s)", class_name(class_of(rc)),
            eh_calls - calls0, class_name(class_of(eh_code)));
    }

    /* Working traffic on cu calls nothing. */
    calls0 = eh_calls;
    ring(cu);
    chk(eh_calls == calls0, "ring on cu: no handler called (got %d calls)",
        eh_calls - calls0);

    report();
    MPI_Comm_free(&cr);
    MPI_Comm_free(&cu);
    fflush(stdout);
    rc = MPI_Finalize();
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "# [rank %d] MPI_Finalize returned %d\n", rank, rc);
        return 1;
    }
    return tap_status() || nchk_failed;
}
