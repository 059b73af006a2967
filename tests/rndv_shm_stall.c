/* ftw-test: np=2 mode=ftwrap timeout=60 env=FTW_RNDV_THRESHOLD=64k env=FTW_XPORT=shm env=FTW_SHM_PULL=pipe */
/*
 * rndv_shm_stall - an shm pull whose sender stays out of MPI calls.
 *
 * The shm pipeline (FTW_SHM_PULL=pipe) needs the sender to copy
 * fragments in from its own MPI calls; a split pull (rndv_split_stall)
 * takes the sender's help only where it comes.  Rank 1 posts an MPI_Isend of 16 MiB + 7 and then computes
 * for 2 s without calling MPI before its MPI_Wait; rank 0 receives.
 * Asserts:
 *  - rank 0's MPI_Recv succeeds with the data intact (checksum) well
 *    before rank 1 calls MPI again (under 1.5 s): the receiver reads the
 *    rest with cma when the sender answers nothing;
 *  - the count is the real size; rank 1's MPI_Wait succeeds; the
 *    exchange works again afterwards (a second message the same way
 *    with the sender waiting at once).
 */
#include "tap.h"

#include <stdlib.h>
#include <time.h>

#define BIG ((size_t)(16 << 20) + 7)

/* Busy for sec seconds without calling MPI. */
static void compute(double sec)
{
    struct timespec a, b;

    clock_gettime(CLOCK_MONOTONIC, &a);
    do
        clock_gettime(CLOCK_MONOTONIC, &b);
    while ((double)(b.tv_sec - a.tv_sec) +
           (double)(b.tv_nsec - a.tv_nsec) * 1e-9 < sec);
}

int main(int argc, char **argv)
{
    unsigned char *buf = malloc(BIG);
    MPI_Request req;
    MPI_Status st;
    int rank, ok = 1, n = -1;
    double t0, dt = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (buf == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    tap_plan(3);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        tap_fill(buf, BIG, 31);
        ok &= MPI_Isend(buf, (int)BIG, MPI_BYTE, 0, 1, MPI_COMM_WORLD,
                        &req) == MPI_SUCCESS;
        compute(2.0);
        ok &= MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS;
    } else {
        t0 = MPI_Wtime();
        ok &= MPI_Recv(buf, (int)BIG, MPI_BYTE, 1, 1, MPI_COMM_WORLD,
                       &st) == MPI_SUCCESS;
        dt = MPI_Wtime() - t0;
        MPI_Get_count(&st, MPI_BYTE, &n);
        ok &= tap_check(buf, BIG, 31) && n == (int)BIG;
    }
    tap_ok(ok, "16 MiB + 7 from a sender out of MPI for 2 s: intact, "
           "real count, its MPI_Wait succeeds");
    tap_ok(rank != 0 || dt < 1.5, "... received in %.3f s, before the "
           "sender called MPI again", dt);
    if (rank == 1) {
        tap_fill(buf, BIG, 32);
        ok = MPI_Send(buf, (int)BIG, MPI_BYTE, 0, 2, MPI_COMM_WORLD) ==
             MPI_SUCCESS;
    } else {
        ok = MPI_Recv(buf, (int)BIG, MPI_BYTE, 1, 2, MPI_COMM_WORLD,
                      MPI_STATUS_IGNORE) == MPI_SUCCESS &&
             tap_check(buf, BIG, 32);
    }
    tap_ok(ok, "a second message, sender waiting: intact");
    free(buf);
    MPI_Finalize();
    return tap_status();
}
