/* ftw-test: np=4 mode=ftwrap timeout=20 expect-failed=3 fate=3:signal:KILL */
/*
 * fail_recv - directed point-to-point with a peer that dies by SIGKILL.
 *
 * Rank 3 leaves a barrier, sleeps 200 ms and SIGKILLs itself.  Meanwhile
 *   rank 0 is blocked in MPI_Recv from 3,
 *   rank 1 is blocked in a 4 MiB MPI_Send to 3 (never received),
 *   rank 2 is blocked in a 4-byte MPI_Ssend to 3 (never received);
 * each call must return FTW_ERR_PROC_FAIL_STOP within 5 s.  Then rank 0:
 *   - MPI_Irecv from 3 + MPI_Wait: FTW_ERR_PROC_FAIL_STOP, request freed;
 *   - MPI_Waitall over {Irecv from 1, Irecv from 3, Irecv from 2}:
 *     MPI_ERR_IN_STATUS, statuses[1] of class FTW_ERR_PROC_FAIL_STOP, the
 *     others MPI_SUCCESS with their checksummed data intact;
 *   - a 4 MiB and a 4-byte MPI_Send to 3: FTW_ERR_PROC_FAIL_STOP at once.
 * Ranks 0-2 then run a ring of checksummed messages (64 B and 1 MiB) for
 * 0.5 s.  Ranks 1 and 2 send their verdicts to rank 0 point-to-point; rank
 * 0 prints TAP with tap_ok_local() (plan at the end) and everyone calls
 * MPI_Finalize, which must return although rank 3 is gone.
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

#define TAG_DEAD 10   /* never sent: receives from / sends to the victim */
#define TAG_WALL 11   /* ranks 1, 2 -> 0 for the Waitall */
#define TAG_CTRL 12
#define TAG_RING 13
#define TAG_RESULT 14

#define BIG (4 << 20)
#define WALL1 1000
#define WALL2 (200 * 1024)

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

static void victim(void)
{
    fflush(stdout);
    fflush(stderr);
    usleep(KILL_DELAY_US);
    raise(SIGKILL);
    _exit(99); /* not reached */
}

/* Rank 0: everything about receiving from and sending to the dead rank. */
static void rank0(char *big)
{
    MPI_Status st, sts[3];
    MPI_Request req, reqs[3];
    char small[16], *w1 = malloc(WALL1), *w2 = malloc(WALL2);
    double t0, t;
    int rc, cnt;

    /* Blocked in MPI_Recv while rank 3 dies. */
    memset(&st, 0, sizeof st);
    st.MPI_SOURCE = -1;
    st.MPI_ERROR = MPI_SUCCESS;
    t0 = MPI_Wtime();
    rc = MPI_Recv(small, 4, MPI_BYTE, VICTIM, TAG_DEAD, MPI_COMM_WORLD, &st);
    t = MPI_Wtime() - t0;
    chk_class(rc, FTW_ERR_PROC_FAIL_STOP, "MPI_Recv from 3 blocked as 3 dies");
    chk_time(t, "MPI_Recv from 3 blocked as 3 dies");
    chk(st.MPI_SOURCE == VICTIM ||
        (st.MPI_ERROR != MPI_SUCCESS &&
         class_of(st.MPI_ERROR) == FTW_ERR_PROC_FAIL_STOP),
        "MPI_Recv status: MPI_SOURCE %d, MPI_ERROR %s", st.MPI_SOURCE,
        class_name(class_of(st.MPI_ERROR)));

    /* Irecv + Wait from the dead rank. */
    t0 = MPI_Wtime();
    rc = MPI_Irecv(small, 4, MPI_BYTE, VICTIM, TAG_DEAD, MPI_COMM_WORLD, &req);
    if (rc == MPI_SUCCESS) {
        rc = MPI_Wait(&req, &st);
        chk(req == MPI_REQUEST_NULL, "MPI_Wait on Irecv from dead 3: "
            "request completed (freed)");
    } else {
        chk(1, "MPI_Irecv from dead 3 refused at once (no request)");
    }
    t = MPI_Wtime() - t0;
    chk_class(rc, FTW_ERR_PROC_FAIL_STOP, "MPI_Irecv+MPI_Wait from dead 3");
    chk_time(t, "MPI_Irecv+MPI_Wait from dead 3");

    /* Waitall: the dead peer's request fails, the live ones complete. */
    memset(w1, 0, WALL1);
    memset(w2, 0, WALL2);
    for (int i = 0; i < 3; i++) {
        reqs[i] = MPI_REQUEST_NULL;
        sts[i].MPI_ERROR = -12345;
    }
    t0 = MPI_Wtime();
    rc = MPI_Irecv(w1, WALL1, MPI_BYTE, 1, TAG_WALL, MPI_COMM_WORLD, &reqs[0]);
    chk(rc == MPI_SUCCESS, "MPI_Irecv from 1 posted");
    rc = MPI_Irecv(small, 4, MPI_BYTE, VICTIM, TAG_DEAD, MPI_COMM_WORLD,
                   &reqs[1]);
    chk(rc == MPI_SUCCESS || class_of(rc) == FTW_ERR_PROC_FAIL_STOP,
        "MPI_Irecv from dead 3 posted or refused with FTW_ERR_PROC_FAIL_STOP "
        "(got %s)", class_name(class_of(rc)));
    rc = MPI_Irecv(w2, WALL2, MPI_BYTE, 2, TAG_WALL, MPI_COMM_WORLD, &reqs[2]);
    chk(rc == MPI_SUCCESS, "MPI_Irecv from 2 posted");
    rc = MPI_Waitall(3, reqs, sts);
    t = MPI_Wtime() - t0;
    chk_class(rc, MPI_ERR_IN_STATUS, "MPI_Waitall {1, dead 3, 2}");
    chk_time(t, "MPI_Waitall {1, dead 3, 2}");
    chk(class_of(sts[1].MPI_ERROR) == FTW_ERR_PROC_FAIL_STOP,
        "MPI_Waitall: statuses[1] (dead 3) is FTW_ERR_PROC_FAIL_STOP (got %s)",
        class_name(class_of(sts[1].MPI_ERROR)));
    chk(sts[0].MPI_ERROR == MPI_SUCCESS && sts[2].MPI_ERROR == MPI_SUCCESS,
        "MPI_Waitall: statuses[0], [2] (live 1, 2) MPI_SUCCESS (got %d, %d)",
        sts[0].MPI_ERROR, sts[2].MPI_ERROR);
    cnt = -1;
    MPI_Get_count(&sts[0], MPI_BYTE, &cnt);
    chk(sts[0].MPI_SOURCE == 1 && cnt == WALL1 && tap_check(w1, WALL1, 1001),
        "MPI_Waitall: %d B from rank 1 intact (source %d, count %d)", WALL1,
        sts[0].MPI_SOURCE, cnt);
    cnt = -1;
    MPI_Get_count(&sts[2], MPI_BYTE, &cnt);
    chk(sts[2].MPI_SOURCE == 2 && cnt == WALL2 && tap_check(w2, WALL2, 1002),
        "MPI_Waitall: %d B from rank 2 intact (source %d, count %d)", WALL2,
        sts[2].MPI_SOURCE, cnt);
    chk(reqs[0] == MPI_REQUEST_NULL && reqs[1] == MPI_REQUEST_NULL &&
        reqs[2] == MPI_REQUEST_NULL, "MPI_Waitall: all requests freed");

    /* Sends to the dead rank, large and small. */
    tap_fill(big, BIG, 3);
    t0 = MPI_Wtime();
    rc = MPI_Send(big, BIG, MPI_BYTE, VICTIM, TAG_DEAD, MPI_COMM_WORLD);
    t = MPI_Wtime() - t0;
    chk_class(rc, FTW_ERR_PROC_FAIL_STOP, "4 MiB MPI_Send to dead 3");
    chk_time(t, "4 MiB MPI_Send to dead 3");
    t0 = MPI_Wtime();
    rc = MPI_Send(small, 4, MPI_BYTE, VICTIM, TAG_DEAD, MPI_COMM_WORLD);
    t = MPI_Wtime() - t0;
    chk_class(rc, FTW_ERR_PROC_FAIL_STOP, "4 B MPI_Send to dead 3");
    chk_time(t, "4 B MPI_Send to dead 3");
    free(w1);
    free(w2);
}

/* Ranks 1 and 2: blocked in a send to rank 3 as it dies, then the data of
 * rank 0's Waitall. */
static void sender(char *big)
{
    char small[4] = {1, 2, 3, 4}, *w;
    int len = rank == 1 ? WALL1 : WALL2, rc;
    const char *what = rank == 1 ? "4 MiB MPI_Send to 3 blocked as 3 dies"
                                 : "4 B MPI_Ssend to 3 blocked as 3 dies";
    double t0, t;

    tap_fill(big, BIG, 7);
    t0 = MPI_Wtime();
    if (rank == 1)
        rc = MPI_Send(big, BIG, MPI_BYTE, VICTIM, TAG_DEAD, MPI_COMM_WORLD);
    else
        rc = MPI_Ssend(small, 4, MPI_BYTE, VICTIM, TAG_DEAD, MPI_COMM_WORLD);
    t = MPI_Wtime() - t0;
    chk_class(rc, FTW_ERR_PROC_FAIL_STOP, what);
    chk_time(t, what);

    w = malloc(len);
    tap_fill(w, len, 1000 + rank);
    rc = MPI_Send(w, len, MPI_BYTE, 0, TAG_WALL, MPI_COMM_WORLD);
    chk(rc == MPI_SUCCESS, "MPI_Send of %d B to rank 0 (got %s)", len,
        class_name(class_of(rc)));
    free(w);
}

int main(int argc, char **argv)
{
    int size, rc;
    char *big;

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
    big = malloc(BIG);

    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS)
        tap_diag("initial barrier failed");
    if (rank == VICTIM)
        victim();

    if (rank == 0)
        rank0(big);
    else
        sender(big);
    ring(MPI_COMM_WORLD);
    report();
    free(big);

    fflush(stdout);
    rc = MPI_Finalize();
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "# [rank %d] MPI_Finalize returned %d\n", rank, rc);
        return 1;
    }
    return tap_status() || nchk_failed;
}
