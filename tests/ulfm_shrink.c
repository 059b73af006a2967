/* ftw-test: np=5 mode=ftwrap timeout=60 link=ftwrap expect-failed=3,4 fate=3:signal:KILL fate=4:signal:KILL */
/*
 * ulfm_shrink - MPIX_Comm_shrink after one failure and MPIX_Comm_ishrink
 * after a second, then collectives on the results.
 *
 * Rank 4 SIGKILLs itself.  Once ranks 0-3 know, MPIX_Comm_shrink of
 * MPI_COMM_WORLD (whose collectives now fail) gives s1 of 4 ranks, with
 * world ranks 0-3 in order and MPI_COMM_WORLD's error handler
 * (MPI_ERRORS_RETURN); on s1 MPI_Allreduce (sum of world ranks, 6), a
 * checksummed 256 KiB MPI_Bcast from rank 3 and MPI_Gather to rank 0
 * ([100 101 102 103]) work.  Then rank 3 SIGKILLs itself; ranks 0-2 see
 * MPI_Barrier on s1 fail (MPIX_ERR_PROC_FAILED), and MPIX_Comm_ishrink of
 * s1 + MPI_Wait gives s2 of 3 ranks on which MPI_Allreduce (3),
 * MPI_Alltoall (exact values) and MPI_Barrier work.  No shrink raises an
 * error, and each returns within 5 s.
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftwrap.h"
#define MAXCHK 64            /* verdicts kept (tap.h) */
#include "tap.h"

#define NP 5
#define VICTIM 4
#define NSURV 3
#define BOUND 5.0
#define AT_ONCE 1.0
#define KILL_DELAY_US 100000
#define BIG (256 * 1024)

#include "survivors.h"

/* comm must hold the world ranks 0..n-1 in order. */
static void chk_members(MPI_Comm comm, int n, const char *what)
{
    MPI_Group g;
    int size = -1, mask;

    MPI_Comm_group(comm, &g);
    mask = world_mask_of(g, &size);
    MPI_Group_free(&g);
    chk(size == n && mask == (1 << n) - 1, "%s: members %s (want world "
        "ranks 0-%d)", what, mask_str(mask), n - 1);
}

static void on_s1(MPI_Comm s1)
{
    char *big = malloc(BIG);
    int v = 100 + rank, got[4] = {-1, -1, -1, -1}, rc;
    MPI_Errhandler eh;

    chk_members(s1, 4, "s1");
    MPI_Comm_get_errhandler(s1, &eh);
    chk(eh == MPI_ERRORS_RETURN, "s1 has MPI_ERRORS_RETURN");
    chk_allreduce(s1, 0 + 1 + 2 + 3, "s1");
    step = "MPI_Bcast on s1";
    if (rank == 3)
        tap_fill(big, BIG, 9);
    else
        memset(big, 0, BIG);
    rc = MPI_Bcast(big, BIG, MPI_BYTE, 3, s1);
    chk(rc == MPI_SUCCESS && tap_check(big, BIG, 9), "MPI_Bcast of 256 KiB "
        "on s1: %s, data %s", class_name(class_of(rc)),
        tap_check(big, BIG, 9) ? "intact" : "WRONG");
    free(big);
    step = "MPI_Gather on s1";
    rc = MPI_Gather(&v, 1, MPI_INT, got, 1, MPI_INT, 0, s1);
    if (rank == 0)
        chk(rc == MPI_SUCCESS && got[0] == 100 && got[1] == 101 &&
            got[2] == 102 && got[3] == 103, "MPI_Gather on s1: [%d %d %d "
            "%d]", got[0], got[1], got[2], got[3]);
}

static void on_s2(MPI_Comm s2)
{
    int sb[3], rb[3] = {-1, -1, -1}, rc;

    chk_members(s2, 3, "s2");
    chk_allreduce(s2, 0 + 1 + 2, "s2");
    step = "MPI_Alltoall on s2";
    for (int i = 0; i < 3; i++)
        sb[i] = rank * 10 + i;
    rc = MPI_Alltoall(sb, 1, MPI_INT, rb, 1, MPI_INT, s2);
    chk(rc == MPI_SUCCESS && rb[0] == rank && rb[1] == 10 + rank &&
        rb[2] == 20 + rank, "MPI_Alltoall on s2: [%d %d %d]", rb[0], rb[1],
        rb[2]);
    step = "MPI_Barrier on s2";
    chk_class(MPI_Barrier(s2), MPI_SUCCESS, "MPI_Barrier on s2");
}

int main(int argc, char **argv)
{
    static const int surv[NSURV] = {0, 1, 2};
    MPI_Comm s1 = MPI_COMM_NULL, s2 = MPI_COMM_NULL;
    MPI_Request req;
    double t0;
    int rc;

    if (!setup(&argc, &argv))
        return 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 4)
        victim();
    watchdog_start(40);
    wait_known(1 << 4, BOUND);
    step = "MPIX_Comm_shrink of MPI_COMM_WORLD";
    t0 = MPI_Wtime();
    rc = MPIX_Comm_shrink(MPI_COMM_WORLD, &s1);
    chk_class(rc, MPI_SUCCESS, "MPIX_Comm_shrink after one failure");
    chk_time(MPI_Wtime() - t0, BOUND, "MPIX_Comm_shrink");
    if (rc != MPI_SUCCESS)
        return finish(surv, NSURV);
    on_s1(s1);
    MPI_Barrier(s1);
    if (rank == 3)
        victim();
    wait_known(1 << 3, BOUND);
    step = "MPI_Barrier on s1 after the second failure";
    chk_class(MPI_Barrier(s1), MPIX_ERR_PROC_FAILED,
              "MPI_Barrier on s1 after rank 3 failed");
    step = "MPIX_Comm_ishrink of s1";
    t0 = MPI_Wtime();
    rc = MPIX_Comm_ishrink(s1, &s2, &req);
    if (rc == MPI_SUCCESS)
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    chk_class(rc, MPI_SUCCESS, "MPIX_Comm_ishrink + MPI_Wait after a "
              "second failure");
    chk_time(MPI_Wtime() - t0, BOUND, "MPIX_Comm_ishrink");
    if (rc == MPI_SUCCESS)
        on_s2(s2);
    return finish(surv, NSURV);
}
