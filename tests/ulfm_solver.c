/* ftw-test: np=4 mode=ftwrap timeout=60 link=ftwrap expect-failed=2 fate=2:signal:KILL */
/*
 * ulfm_solver - an iterative computation written against ULFM survives a
 * process failure: detect, revoke, shrink, redo, finish with the exact
 * answer.
 *
 * 40 iterations; iteration t sums j*j over j in [t*B, (t+1)*B), each rank
 * taking the j with j % size == rank of the current communicator.  The
 * partial sums travel around a ring by point-to-point messages (rank 0 ->
 * 1 -> ... -> size-1 -> 0) and rank 0 sends the iteration's sum to every
 * other rank, which adds it to its running total.  World rank 2 SIGKILLs
 * itself at the start of iteration 7.  Only its ring neighbours can see
 * the failure (rank 3's receive from it, or rank 1's send to it, fails
 * with MPIX_ERR_PROC_FAILED); whoever sees it revokes the communicator,
 * which frees the others (rank 0 waits for the ring's sum, from live
 * rank 3) with MPIX_ERR_REVOKED.
 * Every survivor shrinks, redoes the iteration on the 3-rank communicator
 * and goes on.  Each survivor must end with the exact sum of j*j for
 * j < 40*B (its checksum), having recovered exactly once, on a final
 * communicator of 3 ranks where an MPI_Allreduce of the totals agrees;
 * rank 0 must have been freed by MPIX_ERR_REVOKED, ranks 1 and 3 by
 * either class; the whole run ends within the bound.
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftwrap.h"
#define MAXCHK 64            /* verdicts kept (tap.h) */
#include "tap.h"

#define NP 4
#define VICTIM 2
#define NSURV 3
#define BOUND 10.0
#define AT_ONCE 1.0
#define KILL_DELAY_US 0
#define ITERS 40
#define B 5000
#define KILL_AT 7

#include "survivors.h"

/* This rank's share of iteration t on a communicator of n ranks. */
static uint64_t partial(int t, int r, int n)
{
    uint64_t s = 0;

    for (uint64_t j = (uint64_t)t * B; j < (uint64_t)(t + 1) * B; j++)
        if ((int)(j % (uint64_t)n) == r)
            s += j * j;
    return s;
}

/* One iteration; MPI_SUCCESS and *sum, or the first error. */
static int iteration(MPI_Comm c, int t, uint64_t *sum)
{
    int r, n, rc;
    uint64_t acc, mine;

    MPI_Comm_rank(c, &r);
    MPI_Comm_size(c, &n);
    mine = partial(t, r, n);
    if (r == 0) {
        rc = MPI_Send(&mine, 1, MPI_UINT64_T, 1 % n, t, c);
        if (rc == MPI_SUCCESS)
            rc = MPI_Recv(&acc, 1, MPI_UINT64_T, n - 1, t, c,
                          MPI_STATUS_IGNORE);
        for (int q = 1; q < n && rc == MPI_SUCCESS; q++)
            rc = MPI_Send(&acc, 1, MPI_UINT64_T, q, 1000 + t, c);
    } else {
        rc = MPI_Recv(&acc, 1, MPI_UINT64_T, r - 1, t, c, MPI_STATUS_IGNORE);
        acc += mine;
        if (rc == MPI_SUCCESS)
            rc = MPI_Send(&acc, 1, MPI_UINT64_T, (r + 1) % n, t, c);
        if (rc == MPI_SUCCESS)
            rc = MPI_Recv(&acc, 1, MPI_UINT64_T, 0, 1000 + t, c,
                          MPI_STATUS_IGNORE);
    }
    if (rc == MPI_SUCCESS)
        *sum = acc;
    return rc;
}

/* The ULFM recovery: revoke, shrink, carry on with the survivors. */
static int recover(MPI_Comm *c)
{
    MPI_Comm s;
    int rc;

    MPIX_Comm_revoke(*c);
    rc = MPIX_Comm_shrink(*c, &s);
    if (rc != MPI_SUCCESS)
        return rc;
    if (*c != MPI_COMM_WORLD)
        MPI_Comm_free(c);
    *c = s;
    return MPI_SUCCESS;
}

int main(int argc, char **argv)
{
    static const int surv[NSURV] = {0, 1, 3};
    uint64_t total = 0, want = 0, check = 0, n = (uint64_t)ITERS * B;
    int recoveries = 0, first_err = MPI_SUCCESS, size = -1, rc;
    double t0;
    MPI_Comm c;

    if (!setup(&argc, &argv))
        return 0;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    want = (n - 1) * n * (2 * n - 1) / 6;
    watchdog_start(45);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (int t = 0; t < ITERS;) {
        uint64_t sum = 0;

        if (rank == VICTIM && t == KILL_AT)
            victim();
        step = "iteration";
        rc = iteration(c, t, &sum);
        if (rc == MPI_SUCCESS) {
            total += sum;
            t++;
            continue;
        }
        if (first_err == MPI_SUCCESS)
            first_err = class_of(rc);
        step = "recovery";
        if (recover(&c) != MPI_SUCCESS || ++recoveries > 3)
            break;
    }
    chk_time(MPI_Wtime() - t0, BOUND, "the whole computation");
    chk(total == want, "total %llu (want %llu, the sum of j*j for j < %llu)",
        (unsigned long long)total, (unsigned long long)want,
        (unsigned long long)n);
    chk(recoveries == 1, "recovered %d times (want 1)", recoveries);
    if (rank == 0)
        chk_class(first_err, MPIX_ERR_REVOKED, "rank 0's first error");
    else
        chk(first_err == MPIX_ERR_REVOKED || first_err ==
            MPIX_ERR_PROC_FAILED, "rank %d's first error: %s (want "
            "MPIX_ERR_PROC_FAILED or MPIX_ERR_REVOKED)", rank,
            class_name(first_err));
    MPI_Comm_size(c, &size);
    chk(size == NSURV, "final communicator of %d ranks (want 3)", size);
    rc = MPI_Allreduce(&total, &check, 1, MPI_UINT64_T, MPI_BXOR, c);
    chk(rc == MPI_SUCCESS && check == want, "MPI_Allreduce(BXOR) of the "
        "three totals on the final communicator: %s, %s",
        class_name(class_of(rc)), check == want ? "they agree" : "DIFFER");
    MPI_Comm_free(&c);
    return finish(surv, NSURV);
}
