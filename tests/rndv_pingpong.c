/* ftw-test: np=2 mode=both timeout=120 env=FTW_RNDV_THRESHOLD=64k */
/*
 * rndv_pingpong - one message in flight, the sender blocked: ping-pong
 * of blocking sends and receives at sizes through ftwrap's rendezvous
 * (64 KiB .. 16 MiB), each way's payload different at every iteration.
 *
 * Asserts, at each size, over 20 round trips from the same two buffers:
 *  - MPI_Send/MPI_Recv: every message arrives whole (checksum of the
 *    iteration's payload), the status gives source, tag and size;
 *  - the same with MPI_Ssend and with MPI_Isend + MPI_Wait answering
 *    a blocking receive;
 *  - a receive larger than the message gets the message and its size.
 * Natively the same assertions hold (transparency).
 */
#include "tap.h"

#include <stdlib.h>
#include <string.h>

#define ITERS 20

static int rank;

/* One round trip of len bytes (recv_len posted): 1 if all held here. */
static int round_trip(unsigned char *sb, unsigned char *rb, unsigned char *ex,
                      size_t len, size_t recv_len, int how, uint64_t seed)
{
    int peer = 1 - rank, ok = 1, count = -1;
    MPI_Status st;
    MPI_Request rq;

    for (int leg = 0; leg < 2; leg++) {
        uint64_t s = seed * 2 + (uint64_t)leg;

        if (rank == leg) {
            tap_fill(sb, len, s);
            if (how == 0)
                ok &= MPI_Send(sb, (int)len, MPI_BYTE, peer, leg + 10,
                               MPI_COMM_WORLD) == MPI_SUCCESS;
            else if (how == 1)
                ok &= MPI_Ssend(sb, (int)len, MPI_BYTE, peer, leg + 10,
                                MPI_COMM_WORLD) == MPI_SUCCESS;
            else
                ok &= MPI_Isend(sb, (int)len, MPI_BYTE, peer, leg + 10,
                                MPI_COMM_WORLD, &rq) == MPI_SUCCESS &&
                      MPI_Wait(&rq, MPI_STATUS_IGNORE) == MPI_SUCCESS;
        } else {
            memset(rb, 0, len);
            ok &= MPI_Recv(rb, (int)recv_len, MPI_BYTE, peer, leg + 10,
                           MPI_COMM_WORLD, &st) == MPI_SUCCESS;
            MPI_Get_count(&st, MPI_BYTE, &count);
            tap_fill(ex, len, s);
            ok &= st.MPI_SOURCE == peer && st.MPI_TAG == leg + 10 &&
                  count == (int)len && memcmp(rb, ex, len) == 0;
        }
    }
    return ok;
}

int main(int argc, char **argv)
{
    static const size_t sizes[] = { 64 << 10, 256 << 10, 1 << 20, 4 << 20,
                                    16 << 20 };
    static const char *hows[] = { "MPI_Send", "MPI_Ssend", "MPI_Isend" };
    int nsizes = (int)(sizeof(sizes) / sizeof(sizes[0]));

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    tap_plan(4 * nsizes);
    for (int k = 0; k < nsizes; k++) {
        size_t len = sizes[k];
        unsigned char *sb = malloc(2 * len), *rb = malloc(2 * len);
        unsigned char *ex = malloc(len);
        int ok;

        if (sb == NULL || rb == NULL || ex == NULL)
            MPI_Abort(MPI_COMM_WORLD, 1);
        for (int how = 0; how < 3; how++) {
            ok = 1;
            for (int i = 0; i < ITERS; i++)
                ok &= round_trip(sb, rb, ex, len, len, how,
                                 (uint64_t)(k * 1000 + how * 100 + i));
            tap_ok(ok, "%zu KiB: %d round trips of %s/MPI_Recv", len >> 10,
                   ITERS, hows[how]);
        }
        ok = 1;
        for (int i = 0; i < 4; i++)
            ok &= round_trip(sb, rb, ex, len, 2 * len, 0,
                             (uint64_t)(k * 1000 + 900 + i));
        tap_ok(ok, "%zu KiB: a larger receive gets the message and its size",
               len >> 10);
        free(sb);
        free(rb);
        free(ex);
    }
    MPI_Finalize();
    return tap_failed_ != 0;
}
