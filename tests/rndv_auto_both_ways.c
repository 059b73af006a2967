/* ftw-test: np=2 mode=ftwrap timeout=120 */
/*
 * rndv_auto_both_ways - FTW_XPORT=auto (the default) sends a message the
 * push slots would take with cma while the sender has rendezvous
 * receives of its own pending: each process then copies in as many
 * messages as it sends, and the pipeline's second copy would cost a
 * core that has its own to make (osu_bibw's windows, a halo exchange).
 *
 * Both ranks exchange windows of 8 messages of 256 KiB + 3, each rank
 * posting its 8 MPI_Irecv first, then its 8 MPI_Isend, then one
 * MPI_Waitall, 10 times; then 10 nonblocking round trips of the same
 * size (MPI_Irecv of the reply posted before the MPI_Isend: one
 * receive pending, a ping-pong).  Every message is checked (checksum,
 * count).  Asserts, from each rank's pull counters:
 *  - the windows are pulled by cma, every message (rndv_cma +80,
 *    rndv_shm +0);
 *  - the round trips go through shm as before (rank 0 pulls 10 replies,
 *    rank 1 10 requests: rndv_shm +10, rndv_cma +0).
 */
#include "tap.h"

#include <stdlib.h>

#define SIZE ((size_t)(256 << 10) + 3)
#define WIN 8
#define ROUNDS 10

int main(int argc, char **argv)
{
    unsigned char *sbuf = malloc(SIZE * WIN), *rbuf = malloc(SIZE * WIN);
    MPI_Request req[2 * WIN];
    MPI_Status st[2 * WIN];
    int rank, other, ok = 1;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (sbuf == NULL || rbuf == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    /* More ranks than CPUs: waits sleep, and auto takes cma for all. */
    if (!tap_need_cpus(2, "for the shm pipeline"))
        return 0;
    tap_plan(3);
    other = 1 - rank;
    MPI_Barrier(MPI_COMM_WORLD);

    long long cma0 = tap_ftw_stat("rndv_cma"), shm0 = tap_ftw_stat("rndv_shm");

    for (int r = 0; r < ROUNDS; r++) {
        for (int j = 0; j < WIN; j++) {
            tap_fill(sbuf + j * SIZE, SIZE, 100 * rank + 10 * r + j);
            ok &= MPI_Irecv(rbuf + j * SIZE, (int)SIZE, MPI_BYTE, other, j,
                            MPI_COMM_WORLD, &req[j]) == MPI_SUCCESS;
        }
        for (int j = 0; j < WIN; j++)
            ok &= MPI_Isend(sbuf + j * SIZE, (int)SIZE, MPI_BYTE, other, j,
                            MPI_COMM_WORLD, &req[WIN + j]) == MPI_SUCCESS;
        ok &= MPI_Waitall(2 * WIN, req, st) == MPI_SUCCESS;
        for (int j = 0; j < WIN; j++) {
            int n = -1;

            MPI_Get_count(&st[j], MPI_BYTE, &n);
            ok &= n == (int)SIZE &&
                  tap_check(rbuf + j * SIZE, SIZE, 100 * other + 10 * r + j);
        }
    }

    long long cma1 = tap_ftw_stat("rndv_cma"), shm1 = tap_ftw_stat("rndv_shm");

    tap_ok(ok, "%d windows of %d x 256 KiB + 3 both ways: intact, real "
           "counts", ROUNDS, WIN);
    tap_ok(cma1 - cma0 == ROUNDS * WIN && shm1 == shm0,
           "... each pulled by cma, none through shm (rndv_cma +%lld, "
           "rndv_shm +%lld)", cma1 - cma0, shm1 - shm0);

    ok = 1;
    for (int r = 0; r < ROUNDS; r++) {
        MPI_Request rr, sr;

        if (rank == 0) {
            tap_fill(sbuf, SIZE, 500 + r);
            ok &= MPI_Irecv(rbuf, (int)SIZE, MPI_BYTE, 1, 7, MPI_COMM_WORLD,
                            &rr) == MPI_SUCCESS;
            ok &= MPI_Isend(sbuf, (int)SIZE, MPI_BYTE, 1, 6, MPI_COMM_WORLD,
                            &sr) == MPI_SUCCESS;
            ok &= MPI_Wait(&sr, MPI_STATUS_IGNORE) == MPI_SUCCESS;
            ok &= MPI_Wait(&rr, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
                  tap_check(rbuf, SIZE, 600 + r);
        } else {
            ok &= MPI_Irecv(rbuf, (int)SIZE, MPI_BYTE, 0, 6, MPI_COMM_WORLD,
                            &rr) == MPI_SUCCESS;
            ok &= MPI_Wait(&rr, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
                  tap_check(rbuf, SIZE, 500 + r);
            tap_fill(sbuf, SIZE, 600 + r);
            ok &= MPI_Isend(sbuf, (int)SIZE, MPI_BYTE, 0, 7, MPI_COMM_WORLD,
                            &sr) == MPI_SUCCESS;
            ok &= MPI_Wait(&sr, MPI_STATUS_IGNORE) == MPI_SUCCESS;
        }
    }

    long long cma2 = tap_ftw_stat("rndv_cma"), shm2 = tap_ftw_stat("rndv_shm");

    tap_ok(ok && shm2 - shm1 == ROUNDS && cma2 == cma1,
           "%d nonblocking round trips (one receive pending): intact, "
           "through shm (rndv_shm +%lld, rndv_cma +%lld)", ROUNDS,
           shm2 - shm1, cma2 - cma1);
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return tap_status();
}
