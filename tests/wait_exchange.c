/* ftw-test: np=2 mode=both timeout=120 env=FTW_RNDV_THRESHOLD=64k */
/*
 * wait_exchange - MPI_Waitall over a halo exchange's window (each rank
 * posts W receives from the other, then W sends to it, then one
 * MPI_Waitall over the 2*W) finishes like the MPI's own, in a process
 * that never made a request MPI_Testsome mishandles (so ftwrap's wait
 * passes are MPI_Testsome over the unfinished tail).
 *
 * Asserts:
 *  - 200 exchanges of W 8-byte messages, message w tagged w: every
 *    receive's status names the peer, its own tag and 8 bytes, and its
 *    slot holds that exchange's payload for w (checksum);
 *  - the same with the peer's last message sent 50 ms late: the wait
 *    returns once it came, every status right;
 *  - null handles and an inactive persistent receive among the window:
 *    their statuses are empty (source MPI_ANY_SOURCE, tag MPI_ANY_TAG,
 *    count 0), the handles of the finished ones are null, the persistent
 *    one stays;
 *  - exchanges of W 256 KiB messages (above the rendezvous threshold, a
 *    buffer each): statuses and checksums of every message.
 */
#include "tap.h"

#include <stdlib.h>
#include <string.h>

#define W 64
#define SMALL 8
#define LARGE (256 << 10)

static int rank, peer;

static uint64_t seed_of(int round, int w, int from)
{
    return (uint64_t)round * 1000003u + (uint64_t)w * 131u + (uint64_t)from;
}

static int status_is(const MPI_Status *st, int src, int tag, int bytes)
{
    int c = -1;

    MPI_Get_count(st, MPI_BYTE, &c);
    return st->MPI_SOURCE == src && st->MPI_TAG == tag && c == bytes;
}

/* One exchange of W messages of len bytes; the last send late_s seconds
 * late.  1 if every status, payload and handle is right. */
static int exchange(unsigned char *rb, unsigned char *sb, int len,
                    int round, double late_s)
{
    MPI_Request r[2 * W];
    MPI_Status st[2 * W];
    int ok = 1;

    for (int w = 0; w < W; w++)
        MPI_Irecv(rb + (size_t)w * len, len, MPI_BYTE, peer, w,
                  MPI_COMM_WORLD, &r[w]);
    for (int w = 0; w < W; w++) {
        tap_fill(sb + (size_t)w * len, (size_t)len, seed_of(round, w, rank));
        if (w == W - 1 && late_s > 0)
            tap_spin(late_s);
        MPI_Isend(sb + (size_t)w * len, len, MPI_BYTE, peer, w,
                  MPI_COMM_WORLD, &r[W + w]);
    }
    ok &= MPI_Waitall(2 * W, r, st) == MPI_SUCCESS;
    for (int w = 0; w < W; w++) {
        ok &= status_is(&st[w], peer, w, len);
        ok &= tap_check(rb + (size_t)w * len, (size_t)len,
                        seed_of(round, w, peer));
        ok &= r[w] == MPI_REQUEST_NULL && r[W + w] == MPI_REQUEST_NULL;
    }
    return ok;
}

/* A window with null handles and an inactive persistent receive. */
static int with_nulls(unsigned char *rb, unsigned char *sb)
{
    MPI_Request r[2 * W + 3];
    MPI_Status st[2 * W + 3];
    int idle = 0, ok = 1, n = 0, at[W];

    MPI_Recv_init(&idle, 1, MPI_INT, peer, 9999, MPI_COMM_WORLD, &r[n++]);
    for (int w = 0; w < W; w++) {
        if (w == W / 2)
            r[n++] = MPI_REQUEST_NULL;
        at[w] = n;
        MPI_Irecv(rb + (size_t)w * SMALL, SMALL, MPI_BYTE, peer, w,
                  MPI_COMM_WORLD, &r[n++]);
    }
    for (int w = 0; w < W; w++) {
        tap_fill(sb + (size_t)w * SMALL, SMALL, seed_of(7777, w, rank));
        MPI_Isend(sb + (size_t)w * SMALL, SMALL, MPI_BYTE, peer, w,
                  MPI_COMM_WORLD, &r[n++]);
    }
    r[n++] = MPI_REQUEST_NULL;
    for (int i = 0; i < n; i++)
        st[i].MPI_SOURCE = st[i].MPI_TAG = -77;
    ok &= MPI_Waitall(n, r, st) == MPI_SUCCESS;
    ok &= tap_status_empty(&st[0]) && tap_status_empty(&st[W / 2 + 1]) &&
          tap_status_empty(&st[n - 1]);
    ok &= r[0] != MPI_REQUEST_NULL;
    for (int w = 0; w < W; w++) {
        ok &= status_is(&st[at[w]], peer, w, SMALL) &&
              r[at[w]] == MPI_REQUEST_NULL;
        ok &= tap_check(rb + (size_t)w * SMALL, SMALL,
                        seed_of(7777, w, peer));
    }
    MPI_Request_free(&r[0]);
    return ok;
}

int main(int argc, char **argv)
{
    unsigned char *rb, *sb;
    int ok;

    MPI_Init(&argc, &argv);
    if (!tap_need_size(2))
        return 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    peer = 1 - rank;
    rb = malloc((size_t)W * LARGE);
    sb = malloc((size_t)W * LARGE);
    if (rb == NULL || sb == NULL)
        MPI_Abort(MPI_COMM_WORLD, 1);
    tap_plan(4);

    ok = 1;
    for (int round = 0; round < 200; round++)
        ok &= exchange(rb, sb, SMALL, round, 0);
    tap_ok(ok, "200 exchanges of %d x %d B: statuses, tags and payloads",
           W, SMALL);

    ok = 1;
    for (int round = 0; round < 4; round++)
        ok &= exchange(rb, sb, SMALL, 500 + round, rank == round % 2 ? 0.05
                                                                      : 0);
    tap_ok(ok, "exchanges with one message 50 ms late: all right once it "
           "came");

    tap_ok(with_nulls(rb, sb), "null handles and an inactive persistent "
           "receive in the window: empty statuses, the rest right");

    ok = 1;
    for (int round = 0; round < 3; round++)
        ok &= exchange(rb, sb, LARGE, 900 + round, 0);
    tap_ok(ok, "exchanges of %d x %d KiB (rendezvous): statuses and "
           "checksums", W, LARGE >> 10);

    free(rb);
    free(sb);
    MPI_Finalize();
    return tap_status();
}
