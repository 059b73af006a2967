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
 *  - a passing stall costs the pipeline only a moment: a third message
 *    whose sender computes 20 ms after posting it stalls (counter
 *    rndv_shm_stalls), and a fourth one 20 ms later, its sender waiting,
 *    is pulled through the segment again (rndv_shm, not rndv_cma): the
 *    pulls from a stalled sender use cma for 1 ms after one stall, not
 *    for a fixed 100 ms.  (With split pulls, SPLIT_PULLS, the third
 *    message is read without a stall: its sender takes no chunk.)
 */
#include "tap.h"

#include <stdlib.h>
#include <time.h>
#include <unistd.h>

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
    tap_plan(5);
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

    long long stalls0 = tap_ftw_stat("rndv_shm_stalls"), stalls1;
    long long shm0, cma0, shm1, cma1;

    if (rank == 1) {
        tap_fill(buf, BIG, 33);
        ok = MPI_Isend(buf, (int)BIG, MPI_BYTE, 0, 3, MPI_COMM_WORLD,
                       &req) == MPI_SUCCESS;
        compute(0.02);
        ok &= MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS;
        tap_fill(buf, BIG, 34);
        ok &= MPI_Send(buf, (int)BIG, MPI_BYTE, 0, 4, MPI_COMM_WORLD) ==
              MPI_SUCCESS;
        stalls1 = stalls0;
        shm0 = shm1 = cma0 = cma1 = 0;
    } else {
        ok = MPI_Recv(buf, (int)BIG, MPI_BYTE, 1, 3, MPI_COMM_WORLD,
                      MPI_STATUS_IGNORE) == MPI_SUCCESS &&
             tap_check(buf, BIG, 33);
        stalls1 = tap_ftw_stat("rndv_shm_stalls");
        shm0 = tap_ftw_stat("rndv_shm");
        cma0 = tap_ftw_stat("rndv_cma");
        usleep(20000);
        ok &= MPI_Recv(buf, (int)BIG, MPI_BYTE, 1, 4, MPI_COMM_WORLD,
                       MPI_STATUS_IGNORE) == MPI_SUCCESS &&
              tap_check(buf, BIG, 34);
        shm1 = tap_ftw_stat("rndv_shm");
        cma1 = tap_ftw_stat("rndv_cma");
    }
#ifdef SPLIT_PULLS
    /* A split pull waits only for chunks the sender took. */
    tap_ok(ok && (rank != 0 || stalls1 == stalls0),
           "a third message, its sender computing 20 ms: intact, read "
           "without a stall (rndv_shm_stalls %lld -> %lld)", stalls0,
           stalls1);
#else
    tap_ok(ok && (rank != 0 || stalls1 > stalls0),
           "a third message, its sender computing 20 ms: intact, the "
           "pull stalled (rndv_shm_stalls %lld -> %lld)", stalls0, stalls1);
#endif
    tap_ok(rank != 0 || (shm1 == shm0 + 1 && cma1 == cma0),
           "a fourth one 20 ms later goes through the segment again "
           "(rndv_shm +%lld, rndv_cma +%lld)", shm1 - shm0, cma1 - cma0);
    free(buf);
    MPI_Finalize();
    return tap_status();
}
