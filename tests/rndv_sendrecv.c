/* ftw-test: np=3 mode=both timeout=120 env=FTW_RNDV_THRESHOLD=64k env=FTW_XPORT=auto */
/*
 * rndv_sendrecv - MPI_Sendrecv and MPI_Sendrecv_replace whose send is at
 * or above the rendezvous threshold (64 KiB here) deliver intact, with
 * their real sizes and envelopes; natively the same assertions hold
 * (transparency).  Under ftwrap the send half of such a call is ftwrap's
 * rendezvous send: each receiver pulled the messages of the first ring
 * at or above the threshold (FTW_Stat_get; skipped natively).
 *
 * Asserts, every payload checked byte for byte against its pattern:
 *  - a ring of three ranks exchanging with MPI_Sendrecv, sizes from just
 *    below the threshold to 8 MiB + 5, each rank's send and receive sizes
 *    different; MPI_Get_count gives the real size, status source and tag
 *    are the sender's, the bytes after the message are untouched;
 *  - the same ring with MPI_ANY_SOURCE / MPI_ANY_TAG on the receive half;
 *  - MPI_Sendrecv_replace around the ring, 64 KiB to 4 MiB + 1, and with
 *    a strided type (MPI_Type_vector): each rank ends with its
 *    predecessor's data in place;
 *  - a large send half with a small receive half (and the reverse) in
 *    one call, both directions of a pair at once (each rank's send waits
 *    for the other's receive: the two must progress together).
 */
#include "tap.h"

#include <stdlib.h>
#include <string.h>

#define MAXLEN (((size_t)8 << 20) + 5)
#define GUARD 64
#define CANARY 0xc0ffeeull

static int rank, size, next, prev;
static unsigned char *sbuf, *rbuf;

static uint64_t seed_of(int test, int src, size_t len)
{
    return ((uint64_t)test << 48) | ((uint64_t)src << 40) | (uint64_t)len;
}

static int ok_rc(int rc, const char *what)
{
    if (rc != MPI_SUCCESS)
        tap_diag("rank %d: %s failed with error %d", rank, what, rc);
    return rc == MPI_SUCCESS;
}

/* The size rank r sends in round i (its receive is its predecessor's). */
static size_t len_of(const size_t *lens, int n, int i, int r)
{
    return lens[(i + r) % n];
}

static int check_recv(const MPI_Status *st, size_t len, int src, int tag,
                      uint64_t seed, const char *what)
{
    int count = -1, ok = 1;

    MPI_Get_count(st, MPI_BYTE, &count);
    if (count != (int)len || st->MPI_SOURCE != src || st->MPI_TAG != tag) {
        tap_diag("rank %d: %s of %zu B: count %d source %d tag %d", rank,
                 what, len, count, st->MPI_SOURCE, st->MPI_TAG);
        ok = 0;
    }
    if (!tap_check(rbuf, len, seed)) {
        tap_diag("rank %d: %s of %zu B: payload differs", rank, what, len);
        ok = 0;
    }
    if (!tap_check(rbuf + len, GUARD, CANARY)) {
        tap_diag("rank %d: %s of %zu B: wrote past the message", rank,
                 what, len);
        ok = 0;
    }
    return ok;
}

static int ring(int test, int wild)
{
    static const size_t lens[] = { 65535, 65536, 65537, 200000,
                                   (size_t)1 << 20, 3000001, MAXLEN };
    const int n = (int)(sizeof(lens) / sizeof(lens[0]));
    int ok = 1;

    for (int i = 0; i < n; i++) {
        size_t slen = len_of(lens, n, i, rank);
        size_t rlen = len_of(lens, n, i, prev);
        MPI_Status st;

        tap_fill(sbuf, slen, seed_of(test, rank, slen));
        tap_fill(rbuf + rlen, GUARD, CANARY);
        ok &= ok_rc(MPI_Sendrecv(sbuf, (int)slen, MPI_BYTE, next, 100 + i,
                                 rbuf, (int)(MAXLEN + GUARD), MPI_BYTE,
                                 wild ? MPI_ANY_SOURCE : prev,
                                 wild ? MPI_ANY_TAG : 100 + i,
                                 MPI_COMM_WORLD, &st), "MPI_Sendrecv");
        ok &= check_recv(&st, rlen, prev, 100 + i, seed_of(test, prev, rlen),
                         "MPI_Sendrecv");
    }
    return ok;
}

static int replace_ring(void)
{
    static const size_t lens[] = { 65536, 300001, ((size_t)4 << 20) + 1 };
    int ok = 1;

    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        size_t len = lens[i];
        MPI_Status st;
        int count = -1;

        tap_fill(rbuf, len, seed_of(3, rank, len));
        ok &= ok_rc(MPI_Sendrecv_replace(rbuf, (int)len, MPI_BYTE, next, 7,
                                         prev, 7, MPI_COMM_WORLD, &st),
                    "MPI_Sendrecv_replace");
        MPI_Get_count(&st, MPI_BYTE, &count);
        if (count != (int)len || st.MPI_SOURCE != prev ||
            !tap_check(rbuf, len, seed_of(3, prev, len))) {
            tap_diag("rank %d: replace of %zu B: count %d source %d%s", rank,
                     len, count, st.MPI_SOURCE,
                     tap_check(rbuf, len, seed_of(3, prev, len)) ? ""
                                                   : ", payload differs");
            ok = 0;
        }
    }
    return ok;
}

/* MPI_Sendrecv_replace of a vector (every other 8-byte block of 2 MiB):
 * the blocks between keep their own bytes. */
static int replace_vector(void)
{
    const int blocks = 1 << 17, blen = 8;
    const size_t span = (size_t)blocks * 2 * blen;
    MPI_Datatype vec;
    MPI_Status st;
    int ok = 1;

    MPI_Type_vector(blocks, blen, 2 * blen, MPI_BYTE, &vec);
    MPI_Type_commit(&vec);
    tap_fill(rbuf, span, seed_of(4, rank, span));
    ok &= ok_rc(MPI_Sendrecv_replace(rbuf, 1, vec, next, 8, prev, 8,
                                     MPI_COMM_WORLD, &st),
                "MPI_Sendrecv_replace (vector)");
    tap_fill(sbuf, span, seed_of(4, prev, span));   /* what came */
    tap_fill(sbuf + span, span, seed_of(4, rank, span)); /* what stays */
    for (int b = 0; b < blocks && ok; b++) {
        size_t at = (size_t)b * 2 * blen;

        if (memcmp(rbuf + at, sbuf + at, blen) != 0 ||
            memcmp(rbuf + at + blen, sbuf + span + at + blen, blen) != 0) {
            tap_diag("rank %d: vector replace: block %d wrong", rank, b);
            ok = 0;
        }
    }
    MPI_Type_free(&vec);
    return ok;
}

/* Ranks 0 and 1 exchange at once: 0 sends 2 MiB and receives 100 B, 1
 * the reverse. */
static int lopsided(void)
{
    size_t slen = rank == 0 ? (size_t)2 << 20 : 100;
    size_t rlen = rank == 0 ? 100 : (size_t)2 << 20;
    int other = 1 - rank, ok = 1;
    MPI_Status st;

    if (rank > 1)
        return 1;
    tap_fill(sbuf, slen, seed_of(5, rank, slen));
    tap_fill(rbuf + rlen, GUARD, CANARY);
    ok &= ok_rc(MPI_Sendrecv(sbuf, (int)slen, MPI_BYTE, other, 9, rbuf,
                             (int)rlen + GUARD, MPI_BYTE, other, 9,
                             MPI_COMM_WORLD, &st), "MPI_Sendrecv (lopsided)");
    return ok & check_recv(&st, rlen, other, 9, seed_of(5, other, rlen),
                           "MPI_Sendrecv (lopsided)");
}

int main(int argc, char **argv)
{
    long long before, after;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (!tap_need_size(3))
        return 0;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    next = (rank + 1) % size;
    prev = (rank + size - 1) % size;
    sbuf = malloc(2 * MAXLEN + GUARD);
    rbuf = malloc(2 * MAXLEN + GUARD);
    if (sbuf == NULL || rbuf == NULL) {
        tap_diag("out of memory");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    tap_plan(6);
    before = tap_rndv_pulls();
    tap_ok(ring(1, 0), "MPI_Sendrecv ring, 64 KiB - 1 .. 8 MiB + 5: "
           "intact, real sizes and envelopes, nothing written past");
    after = tap_rndv_pulls();
    if (before >= 0) {
        if (after - before < 6)
            tap_diag("rank %d: %lld rendezvous pulls in the ring", rank,
                     after - before);
        tap_ok(after - before >= 6, "the ring's 6 messages at or above the "
               "threshold went through ftwrap's rendezvous (pulled)");
    } else {
        tap_ok(1, "the ring's messages went through ftwrap's rendezvous "
               "# SKIP native run");
    }
    tap_ok(ring(2, 1), "the same with MPI_ANY_SOURCE / MPI_ANY_TAG");
    tap_ok(replace_ring(), "MPI_Sendrecv_replace ring, 64 KiB .. "
           "4 MiB + 1: the predecessor's data in place");
    tap_ok(replace_vector(), "MPI_Sendrecv_replace of a 2 MiB vector: "
           "its blocks replaced, the gaps kept");
    tap_ok(lopsided(), "a 2 MiB send with a 100 B receive against the "
           "reverse, at once: both intact");
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return tap_status();
}
