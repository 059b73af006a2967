/* ftw-test: np=4 mode=ftwrap timeout=240 link=ftwrap */
/*
 * ulfm_revoke_loop - a communicator revoked and freed in every iteration
 * (the pattern of ULFM's revocation benchmark), 200 times: the
 * collectives a revocation cuts on some members only and the copies of
 * the notice that keep arriving after the free must not pile up into a
 * hang or a failure.
 *
 * Per round, on four ranks: a service duplicate s and a duplicate f of
 * MPI_COMM_WORLD, a checked MPI_Allreduce on f, a barrier; the last rank
 * revokes f and every rank calls MPI_Allreduce on f, which must fail with
 * MPIX_ERR_REVOKED everywhere (the others may have started it before the
 * notice came: ftwrap abandons it); then an MPI_Allreduce on s must give
 * the right sum of 1 KiB of doubles, and both are freed.
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <stdio.h>

#include "ftwrap.h"
#include "tap.h"

#define ROUNDS 200
#define N 128

int main(int argc, char **argv)
{
    double a[N], b[N];
    int rank, size, revoked_all = 1, sums_ok = 1, warm_ok = 1;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    tap_plan(3);
    for (int r = 0; r < ROUNDS; r++) {
        MPI_Comm s, f;
        int rc;

        for (int i = 0; i < N; i++)
            a[i] = rank + i + r;
        MPI_Comm_dup(MPI_COMM_WORLD, &s);
        MPI_Comm_dup(MPI_COMM_WORLD, &f);
        MPI_Comm_set_errhandler(f, MPI_ERRORS_RETURN);
        rc = MPI_Allreduce(a, b, N, MPI_DOUBLE, MPI_SUM, f);
        for (int i = 0; i < N && rc == MPI_SUCCESS; i++)
            if (b[i] != size * (double)(i + r) + size * (size - 1) / 2.0)
                rc = MPI_ERR_OTHER;
        warm_ok &= rc == MPI_SUCCESS;
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == size - 1)
            MPIX_Comm_revoke(f);
        rc = MPI_Allreduce(a, b, N, MPI_DOUBLE, MPI_SUM, f);
        if (tap_class(rc) != MPIX_ERR_REVOKED) {
            if (revoked_all)
                tap_diag("round %d: MPI_Allreduce on the revoked "
                         "communicator: class %d", r, tap_class(rc));
            revoked_all = 0;
        }
        for (int i = 0; i < N; i++)
            b[i] = -1;
        rc = MPI_Allreduce(a, b, N, MPI_DOUBLE, MPI_SUM, s);
        for (int i = 0; i < N && rc == MPI_SUCCESS; i++)
            if (b[i] != size * (double)(i + r) + size * (size - 1) / 2.0) {
                if (sums_ok)
                    tap_diag("round %d: service sum [%d] is %g, want %g",
                             r, i, b[i], size * (double)(i + r) +
                             size * (size - 1) / 2.0);
                rc = MPI_ERR_OTHER;
            }
        sums_ok &= rc == MPI_SUCCESS;
        MPI_Comm_free(&f);
        MPI_Comm_free(&s);
    }
    tap_ok(warm_ok, "%d rounds: the MPI_Allreduce before the revocation "
           "sums right", ROUNDS);
    tap_ok(revoked_all, "every round's MPI_Allreduce after the revocation "
           "fails with MPIX_ERR_REVOKED on every rank");
    tap_ok(sums_ok, "every round's MPI_Allreduce on the service "
           "communicator sums right");
    MPI_Finalize();
    return tap_status();
}
