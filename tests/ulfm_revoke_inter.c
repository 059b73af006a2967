/* ftw-test: np=4 mode=ftwrap timeout=60 link=ftwrap */
/*
 * ulfm_revoke_inter - MPIX_Comm_revoke on an intercommunicator reaches
 * both groups, processes blocked in calls on it included, and nothing
 * else.
 *
 * Ranks 0-1 and 2-3 form two groups (MPI_Comm_split); two
 * intercommunicators join them (MPI_Intercomm_create, tags 7 and 8): ic
 * and ic2.  On ic, ranks 1-3 post an MPI_Irecv from remote rank 0 that
 * nothing matches and then block in MPI_Barrier(ic); rank 0 waits 300 ms
 * and revokes ic.  Asserted:
 *   - MPIX_Comm_revoke returns MPI_SUCCESS at once on rank 0;
 *   - on ranks 1-3 the barrier returns MPIX_ERR_REVOKED within 5 s (rank
 *     1 is in the revoker's own group, ranks 2-3 in the other);
 *   - the pending MPI_Irecv completes with MPIX_ERR_REVOKED;
 *   - MPIX_Comm_is_revoked(ic) gives 1 everywhere, and MPI_Send on ic
 *     fails with MPIX_ERR_REVOKED at once;
 *   - ic2, made over the same groups, is not revoked: MPI_Allreduce over
 *     it gives the sum of the remote group's ranks, and a checksummed
 *     64 KiB MPI_Bcast from group 0's rank 0 reaches the other group
 *     intact;
 *   - MPIX_Comm_agree on ic2 gives each group the AND of the other
 *     group's flags (ULFM's rule for intercommunicators), and so does it
 *     on the revoked ic (agreement works on a revoked communicator);
 *     MPI_Comm_free works on both.
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftwrap.h"
#include "tap.h"

#define NP 4
#define BOUND 5.0
#define LEN 65536

int main(int argc, char **argv)
{
    int rank, lo, rc, flag = -1, v = 1, sum = -1, buf = 0;
    int revoke_ok = 1, barrier_ok = 1, wait_ok = 1, send_ok = 1;
    double t0, dt = 0;
    char *big;
    MPI_Comm half, ic, ic2;
    MPI_Request pend = MPI_REQUEST_NULL;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (!tap_need_size(NP))
        return 0;
    tap_plan(8);
    lo = rank < 2;
    MPI_Comm_split(MPI_COMM_WORLD, !lo, rank, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, lo ? 2 : 0, 7, &ic);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, lo ? 2 : 0, 8, &ic2);
    MPI_Comm_set_errhandler(ic, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(ic2, MPI_ERRORS_RETURN);
    MPI_Barrier(MPI_COMM_WORLD);

    t0 = MPI_Wtime();
    if (rank == 0) {
        usleep(300000);
        rc = MPIX_Comm_revoke(ic);
        revoke_ok = rc == MPI_SUCCESS && MPI_Wtime() - t0 < 0.3 + 1.0;
    } else {
        MPI_Irecv(&buf, 1, MPI_INT, 0, 5, ic, &pend);
        rc = MPI_Barrier(ic);
        dt = MPI_Wtime() - t0;
        barrier_ok = tap_class(rc) == MPIX_ERR_REVOKED && dt < BOUND;
        if (!barrier_ok)
            tap_diag("MPI_Barrier(ic): class %d after %.2f s", tap_class(rc),
                     dt);
        rc = MPI_Wait(&pend, MPI_STATUS_IGNORE);
        wait_ok = tap_class(rc) == MPIX_ERR_REVOKED;
    }
    tap_ok(revoke_ok, "MPIX_Comm_revoke(ic) returns MPI_SUCCESS at once");
    tap_ok(barrier_ok, "MPI_Barrier blocked on ic returns MPIX_ERR_REVOKED "
           "within %.0f s in both groups", BOUND);
    tap_ok(wait_ok, "an MPI_Irecv pending on ic completes with "
           "MPIX_ERR_REVOKED");
    MPIX_Comm_is_revoked(ic, &flag);
    rc = MPI_Send(&v, 1, MPI_INT, 0, 9, ic);
    send_ok = tap_class(rc) == MPIX_ERR_REVOKED;
    tap_ok(flag == 1 && send_ok, "MPIX_Comm_is_revoked(ic) is 1 and MPI_Send "
           "on ic fails with MPIX_ERR_REVOKED");

    /* ic2: the same groups, not revoked. */
    flag = -1;
    MPIX_Comm_is_revoked(ic2, &flag);
    rc = MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, ic2);
    tap_ok(flag == 0 && rc == MPI_SUCCESS && sum == (lo ? 2 + 3 : 0 + 1),
           "ic2 is not revoked, and MPI_Allreduce over it gives the remote "
           "group's sum");
    big = malloc(LEN);
    if (rank == 0)
        tap_fill(big, LEN, 4242);
    else
        memset(big, 0, LEN);
    rc = MPI_Bcast(big, LEN, MPI_BYTE, lo ? (rank == 0 ? MPI_ROOT :
                                             MPI_PROC_NULL) : 0, ic2);
    tap_ok(rc == MPI_SUCCESS && (lo || tap_check(big, LEN, 4242)),
           "a checksummed 64 KiB MPI_Bcast over ic2 arrives intact");
    free(big);

    flag = 0xff & ~(1 << rank);
    rc = MPIX_Comm_agree(ic2, &flag);
    v = 0xff & ~(0x10 << rank);
    rc |= MPIX_Comm_agree(ic, &v);
    tap_ok(rc == MPI_SUCCESS && flag == (lo ? 0xf3 : 0xfc) &&
           v == (lo ? 0x3f : 0xcf),
           "MPIX_Comm_agree on ic2 gives the AND of the remote group's flags "
           "(0x%x), and so does it on the revoked ic (0x%x)", flag, v);
    rc = MPI_Comm_free(&ic);
    rc |= MPI_Comm_free(&ic2);
    tap_ok(rc == MPI_SUCCESS && ic == MPI_COMM_NULL && ic2 == MPI_COMM_NULL,
           "MPI_Comm_free of the revoked and the live intercommunicator");
    MPI_Comm_free(&half);
    MPI_Finalize();
    return tap_status();
}
