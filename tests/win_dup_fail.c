/* ftw-test: np=4 mode=ftwrap timeout=60 link=ftwrap expect-failed=2 fate=2:signal:KILL env=FTW_INJECT=rank=2,at=dup:1 */
/*
 * win_dup_fail - a process dies after a window was made and before the
 * duplicate of its communicator that ftwrap keeps for the window: the
 * others give the duplicate up instead of waiting in it.
 *
 * Four ranks call MPI_Win_create on MPI_COMM_WORLD (MPI_ERRORS_RETURN).
 * FTW_INJECT kills rank 2 right before its first watched duplicate, the
 * window's, once the MPI's window exists everywhere.  The survivors'
 * MPI_Win_create must fail with FTW_ERR_PROC_FAIL_STOP within 5 s and
 * leave MPI_WIN_NULL.  Then FTW_Comm_validate gives {2} on each
 * survivor; MPI_Allreduce over MPI_COMM_WORLD gives the survivors' sum;
 * a window over a survivors' communicator (MPI_Comm_split) carries a
 * checksummed 4 KiB MPI_Put per rank to its right neighbour between two
 * fences.  (Memory shared with the lost window stays the MPI's: none is
 * reused here.)  Verdicts go to rank 0, which prints TAP.
 */
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftwrap.h"
#include "tap.h"

#define NP 4
#define VICTIM 2
#define NSURV 3
#define BOUND 5.0
#define AT_ONCE 1.0
#define KILL_DELAY_US 0
#define LEN 4096

#include "survivors.h"

int main(int argc, char **argv)
{
    static const int surv[NSURV] = {0, 1, 3};
    char *lost = malloc(LEN), *base = malloc(LEN), *src = malloc(LEN);
    MPI_Win win = MPI_WIN_NULL, w2 = MPI_WIN_NULL;
    MPI_Group g;
    MPI_Comm s = MPI_COMM_NULL;
    int rc, srank = -1, ssize = 0, right, left;
    double t;

    if (!setup(&argc, &argv))
        return 0;
    (void)victim;               /* FTW_INJECT kills rank 2 */
    watchdog_start(40);
    memset(lost, 0, LEN);
    step = "MPI_Barrier";
    MPI_Barrier(MPI_COMM_WORLD);

    step = "MPI_Win_create (rank 2 dies before the duplicate)";
    t = MPI_Wtime();
    rc = MPI_Win_create(lost, LEN, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    t = MPI_Wtime() - t;
    /* Rank 2 does not get here. */
    chk_class(rc, FTW_ERR_PROC_FAIL_STOP,
              "MPI_Win_create with a member dead before its duplicate");
    chk_time(t, BOUND, "MPI_Win_create");
    chk(win == MPI_WIN_NULL, "no window handed out");

    step = "FTW_Comm_validate";
    rc = FTW_Comm_validate(MPI_COMM_WORLD, &g);
    chk_group3(rc, &g, "FTW_Comm_validate(MPI_COMM_WORLD)");
    chk_allreduce(MPI_COMM_WORLD, 0 + 1 + 3, "after the validate");

    step = "MPI_Comm_split";
    rc = MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &s);
    if (chk_class(rc, MPI_SUCCESS, "MPI_Comm_split of the survivors")) {
        MPI_Comm_rank(s, &srank);
        MPI_Comm_size(s, &ssize);
    }
    chk(ssize == NSURV, "survivors' communicator of %d (want %d)", ssize,
        NSURV);
    if (ssize == NSURV) {
        step = "window over the survivors";
        memset(base, 0, LEN);
        right = (srank + 1) % ssize;
        left = (srank + ssize - 1) % ssize;
        tap_fill(src, LEN, 500 + (uint64_t)srank);
        rc = MPI_Win_create(base, LEN, 1, MPI_INFO_NULL, s, &w2);
        if (chk_class(rc, MPI_SUCCESS, "MPI_Win_create over the survivors")) {
            rc = MPI_Win_fence(0, w2);
            if (rc == MPI_SUCCESS)
                rc = MPI_Put(src, LEN, MPI_BYTE, right, 0, LEN, MPI_BYTE, w2);
            if (rc == MPI_SUCCESS)
                rc = MPI_Win_fence(0, w2);
            chk_class(rc, MPI_SUCCESS, "fence, put, fence");
            chk(rc == MPI_SUCCESS && tap_check(base, LEN, 500 + (uint64_t)left),
                "the left neighbour's %d bytes arrived intact", LEN);
            MPI_Win_free(&w2);
        }
        MPI_Comm_free(&s);
    }
    free(base);
    free(src);
    /* lost stays: the MPI's window over it was never freed. */
    return finish(surv, NSURV);
}
