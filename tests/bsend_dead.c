/* ftw-test: np=4 mode=ftwrap timeout=60 link=ftwrap expect-failed=2,3 fate=2:signal:KILL fate=3:signal:KILL */
/*
 * bsend_dead - buffered messages for a process that dies before receiving
 * them hold neither MPI_Buffer_detach nor MPI_Finalize (the MPI's own
 * detach waits for such a message for good).
 *
 * Rank 1 buffers a 1 MiB + 5 byte and a 1000-byte message for rank 2 and
 * the same two for rank 0, then tells rank 2 (a plain send) to SIGKILL
 * itself, which it does without receiving them.
 *  1: MPI_Buffer_detach returns within 10 s with the address and size
 *     attached; rank 0 got both of its messages intact (checksums).
 *  2: bad input: a buffered send with no buffer attached fails with
 *     MPI_ERR_BUFFER; one to the dead rank with MPIX_ERR_PROC_FAILED; a
 *     second MPI_Buffer_attach fails with MPI_ERR_BUFFER; a message larger
 *     than the buffer fails with MPI_ERR_BUFFER and sends nothing (rank 0's
 *     next message on that tag is the right one).
 *  3: the same buffer attached again carries MPI_Ibsend and a restarted
 *     MPI_Bsend_init to rank 0 intact, and a 1 MiB + 5 byte message to
 *     rank 3, which then dies the same way; rank 1 does not detach.
 *  4: MPI_Finalize (the implicit detach) returns within 10 s.
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "tap.h"

#define BIG ((1 << 20) + 5)
#define SMALL 1000
#define TAG_DATA 7
#define TAG_DIE 8
#define TAG_OK 9

static void victim(void)
{
    int go = 0;

    MPI_Recv(&go, 1, MPI_INT, 1, TAG_DIE, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    raise(SIGKILL);
}

/* Rank 0: receive n messages of the given sizes from rank 1 and report. */
static void receiver(int n, const int *len, const uint64_t *seed)
{
    char *in = malloc(BIG);
    int ok = in != NULL;

    for (int i = 0; i < n && ok; i++) {
        MPI_Status st;
        int got = -1;

        ok = MPI_Recv(in, BIG, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD,
                      &st) == MPI_SUCCESS &&
             MPI_Get_count(&st, MPI_BYTE, &got) == MPI_SUCCESS &&
             got == len[i] && tap_check(in, (size_t)len[i], seed[i]);
        if (!ok)
            tap_diag("rank 0: message %d: %d bytes, expected %d", i, got,
                     len[i]);
    }
    MPI_Send(&ok, 1, MPI_INT, 1, TAG_OK, MPI_COMM_WORLD);
    free(in);
}

static int bsize(int n, const int *len)
{
    int total = 0;

    for (int i = 0; i < n; i++) {
        int sz = 0;

        MPI_Pack_size(len[i], MPI_BYTE, MPI_COMM_WORLD, &sz);
        total += sz + MPI_BSEND_OVERHEAD;
    }
    return total;
}

int main(int argc, char **argv)
{
    static const int len1[2] = { BIG, SMALL };
    static const uint64_t seed1[2] = { 11, 12 };
    static const int len3[4] = { SMALL, SMALL, SMALL, SMALL };
    static const uint64_t seed3[4] = { 31, 32, 33, 34 };
    static const int len4[2] = { BIG, SMALL };
    static const uint64_t seed4[2] = { 41, 42 };
    int rank, size, ok = 0, go = 1, rc, rc2, dsize = 0;
    char *big, *small, *buf;
    void *dbuf = NULL;
    double t0, t;

    MPI_Init(&argc, &argv);
    if (!tap_need_size(4))
        return 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (rank == 2 || rank == 3) {
        victim();
        return 1;
    }
    if (rank == 0) {
        tap_rank_ = 1;
        receiver(2, len1, seed1);
        receiver(2, len4, seed4);
        receiver(4, len3, seed3);
        MPI_Finalize();
        return 0;
    }
    tap_rank_ = 0;
    tap_plan(4);
    big = malloc(BIG);
    small = malloc(SMALL);
    size = 2 * bsize(2, len1);
    buf = malloc((size_t)size);
    if (big == NULL || small == NULL || buf == NULL)
        return 1;

    /* 1 */
    MPI_Buffer_attach(buf, size);
    tap_fill(big, BIG, 21);
    tap_fill(small, SMALL, 22);
    rc = MPI_Bsend(big, BIG, MPI_BYTE, 2, TAG_DATA, MPI_COMM_WORLD);
    rc |= MPI_Bsend(small, SMALL, MPI_BYTE, 2, TAG_DATA, MPI_COMM_WORLD);
    tap_fill(big, BIG, seed1[0]);
    tap_fill(small, SMALL, seed1[1]);
    rc |= MPI_Bsend(big, BIG, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD);
    rc |= MPI_Bsend(small, SMALL, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD);
    tap_fill(big, BIG, 99);     /* the copies were taken */
    tap_fill(small, SMALL, 99);
    MPI_Send(&go, 1, MPI_INT, 2, TAG_DIE, MPI_COMM_WORLD);
    t0 = tap_now();
    rc2 = MPI_Buffer_detach(&dbuf, &dsize);
    t = tap_now() - t0;
    MPI_Recv(&ok, 1, MPI_INT, 0, TAG_OK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    tap_ok_local(rc == MPI_SUCCESS && rc2 == MPI_SUCCESS && t < 10.0 &&
                 dbuf == buf && dsize == size && ok,
                 "buffered messages for a rank that died unreceived: "
                 "MPI_Buffer_detach returns in %.3f s with the buffer; the "
                 "live rank's arrive intact (checksums)", t);
    if (rc != MPI_SUCCESS || rc2 != MPI_SUCCESS)
        tap_diag("MPI_Bsend: %d, MPI_Buffer_detach: %d", rc, rc2);

    /* 2 */
    {
        int c1, c2, c3, c4;
        char tiny[64];
        void *d2 = NULL;
        int s2 = 0;

        c1 = tap_class(MPI_Bsend(small, SMALL, MPI_BYTE, 0, TAG_DATA,
                                 MPI_COMM_WORLD));
        MPI_Buffer_attach(tiny, (int)sizeof(tiny));
        c2 = tap_class(MPI_Buffer_attach(buf, size));
        c3 = tap_class(MPI_Bsend(small, SMALL, MPI_BYTE, 0, TAG_DATA,
                                 MPI_COMM_WORLD));
        c4 = tap_class(MPI_Bsend(small, 1, MPI_BYTE, 2, TAG_DATA,
                                 MPI_COMM_WORLD));
        MPI_Buffer_detach(&d2, &s2);
        tap_ok_local(c1 == MPI_ERR_BUFFER && c2 == MPI_ERR_BUFFER &&
                     c3 == MPI_ERR_BUFFER && c4 == MPIX_ERR_PROC_FAILED &&
                     d2 == tiny && s2 == (int)sizeof(tiny),
                     "no buffer, a second attach, a message larger than "
                     "the buffer: MPI_ERR_BUFFER; a buffered send to the "
                     "dead rank: MPIX_ERR_PROC_FAILED");
        if (c1 != MPI_ERR_BUFFER || c2 != MPI_ERR_BUFFER ||
            c3 != MPI_ERR_BUFFER || c4 != MPIX_ERR_PROC_FAILED)
            tap_diag("classes %d %d %d %d", c1, c2, c3, c4);
    }

    /* 3 */
    {
        MPI_Request r, p;
        int c = 0, st = 0;

        MPI_Buffer_attach(buf, size);
        tap_fill(big, BIG, seed4[0]);
        c |= MPI_Ibsend(big, BIG, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD, &r);
        tap_fill(big, BIG, 99);
        c |= MPI_Wait(&r, MPI_STATUS_IGNORE);
        tap_fill(small, SMALL, seed4[1]);
        c |= MPI_Bsend(small, SMALL, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD);
        MPI_Recv(&ok, 1, MPI_INT, 0, TAG_OK, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        c |= MPI_Bsend_init(small, SMALL, MPI_BYTE, 0, TAG_DATA,
                            MPI_COMM_WORLD, &p);
        for (int i = 0; i < 4; i++) {
            tap_fill(small, SMALL, seed3[i]);
            c |= i % 2 ? MPI_Startall(1, &p) : MPI_Start(&p);
            c |= MPI_Wait(&p, MPI_STATUS_IGNORE);
        }
        c |= MPI_Request_free(&p);
        MPI_Recv(&st, 1, MPI_INT, 0, TAG_OK, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        ok &= st;
        tap_fill(big, BIG, 51);
        c |= MPI_Bsend(big, BIG, MPI_BYTE, 3, TAG_DATA, MPI_COMM_WORLD);
        MPI_Send(&go, 1, MPI_INT, 3, TAG_DIE, MPI_COMM_WORLD);
        tap_ok_local(c == MPI_SUCCESS && ok,
                     "the buffer attached again: MPI_Ibsend, MPI_Bsend and "
                     "a restarted MPI_Bsend_init arrive intact "
                     "(checksums)");
    }

    /* 4 */
    t0 = tap_now();
    MPI_Finalize();
    t = tap_now() - t0;
    tap_ok_local(t < 10.0, "MPI_Finalize with a buffered message for a "
                 "rank that died unreceived returns in %.3f s", t);
    free(big);
    free(small);
    free(buf);
    return tap_status();
}
