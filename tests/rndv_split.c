/* ftw-test: np=2 mode=both timeout=120 env=FTW_RNDV_THRESHOLD=64k env=FTW_XPORT=shm env=FTW_SHM_PULL=split */
/*
 * rndv_split - shm pulls split between the receiver and a sender that
 * waits in MPI: one copy, made by both processes.
 *
 * Rank 1 sends rank 0 messages of 64 KiB to 64 MiB + 5, blocking
 * (MPI_Send) and nonblocking (MPI_Isend + MPI_Wait), each posted before
 * rank 0 receives (rank 0 waits for a small ready message first), so the
 * sender is waiting inside MPI while its receiver pulls.  Asserts:
 *  - every message arrives intact (checksum of every byte), with its
 *    real count, and the bytes on either side of the receive are
 *    untouched (guards: the sender writes into the receiver's memory);
 *  - the receiver's buffer at an odd offset (not page-aligned) works;
 *  - under ftwrap the pulls were split (rndv_shm_split on rank 0; on a
 *    loaded host a sender that lost its core in the middle of a chunk
 *    has the next pulls of 100 ms read by cma, rndv_cma: the two add up
 *    to every message) and the sender wrote part of them
 *    (rndv_shm_helped on rank 1 above 0, and less than the bytes sent);
 *    natively the data assertions hold and the counters are skipped.
 */
#include "tap.h"

#include <stdlib.h>
#include <string.h>

#define GUARD 4096
#define MAXLEN (((size_t)64 << 20) + 5)

static const size_t sizes[] = { 64 << 10, (256 << 10) + 1, 1 << 20,
                                (4 << 20) + 3, 16 << 20, MAXLEN };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* The guards around the receive area hold 0xA5. */
static int guards_ok(const unsigned char *area, size_t len)
{
    for (size_t i = 0; i < GUARD; i++)
        if (area[i] != 0xA5 || area[GUARD + len + i] != 0xA5)
            return 0;
    return 1;
}

int main(int argc, char **argv)
{
    /* One byte in: the receive is not page-aligned. */
    unsigned char *area = malloc(MAXLEN + 2 * GUARD + 1), *buf;
    unsigned long long sent = 0;
    int rank, ok = 1, ready = 1, nmsg = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (area == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    area++;
    buf = area + GUARD;
    tap_plan(3);
    for (size_t i = 0; i < NSIZES; i++) {
        for (int nb = 0; nb < 2; nb++) {
            size_t len = sizes[i];
            int tag = (int)(2 * i) + nb + 1;
            uint64_t seed = 100 + (uint64_t)tag;

            if (rank == 1) {
                MPI_Request req;

                tap_fill(buf, len, seed);
                MPI_Send(&ready, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
                if (nb)
                    ok &= mpi_ok(MPI_Isend(buf, (int)len, MPI_BYTE, 0, tag,
                                           MPI_COMM_WORLD, &req), "Isend") &&
                          mpi_ok(MPI_Wait(&req, MPI_STATUS_IGNORE), "Wait");
                else
                    ok &= mpi_ok(MPI_Send(buf, (int)len, MPI_BYTE, 0, tag,
                                          MPI_COMM_WORLD), "Send");
                sent += len;
            } else {
                MPI_Status st;
                int n = -1;

                memset(area, 0xA5, len + 2 * GUARD);
                MPI_Recv(&ready, 1, MPI_INT, 1, 0, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
                tap_spin(0.02);     /* the sender is waiting by now */
                ok &= mpi_ok(MPI_Recv(buf, (int)len, MPI_BYTE, 1, tag,
                                      MPI_COMM_WORLD, &st), "Recv");
                MPI_Get_count(&st, MPI_BYTE, &n);
                if (!tap_check(buf, len, seed) || n != (int)len ||
                    !guards_ok(area, len)) {
                    tap_diag("%zu bytes (%s): data %d, count %d, guards %d",
                             len, nb ? "Isend" : "Send",
                             tap_check(buf, len, seed), n,
                             guards_ok(area, len));
                    ok = 0;
                }
                nmsg++;
            }
        }
    }
    tap_ok(ok, "64 KiB .. 64 MiB + 5, Send and Isend, to an unaligned "
           "receive: intact, real counts, guards untouched");
    if (tap_ftw_stat("rndv_shm_split") < 0) {
        tap_ok(1, "pulls split # SKIP native");
        tap_ok(1, "sender helped # SKIP native");
    } else {
        long long split = tap_ftw_stat("rndv_shm_split");
        long long cma = tap_ftw_stat("rndv_cma");
        long long helped = tap_ftw_stat("rndv_shm_helped");

        if (rank == 1 && !(helped > 0 && (unsigned long long)helped < sent))
            tap_diag("rank 1 wrote %lld of the %llu bytes it sent", helped,
                     sent);
        tap_ok(rank != 0 || (split > 0 && split + cma == nmsg),
               "pulls split (rank 0: %lld of %d; by cma after a sender "
               "that lost its core mid-chunk: %lld)", split, nmsg, cma);
        tap_ok(rank != 1 || (helped > 0 && (unsigned long long)helped < sent),
               "the sender wrote part of its messages into the receiver");
    }
    free(area - 1);
    MPI_Finalize();
    return tap_status();
}
