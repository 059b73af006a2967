/* ftw-test: np=4 mode=both timeout=60 */
/*
 * p2p_blocking - blocking MPI_Send/MPI_Recv are transparent.
 *
 * Asserts, for message sizes 0, 1, 1000, 65536 and 1 MiB + 13 bytes:
 *  - a ring exchange with explicit source and tag delivers exactly the bytes
 *    sent, with status MPI_SOURCE/MPI_TAG and MPI_Get_count matching, and
 *    leaves the receive buffer just beyond the message untouched;
 *  - all-pairs exchanges deliver correctly with explicit source/tag, with
 *    MPI_ANY_SOURCE/MPI_ANY_TAG (each sender seen once, status names it),
 *    and with one wildcard at a time;
 *  - the largest tag the implementation advertises (MPI_TAG_UB) is usable;
 *  - messages from one sender on one tag are received in send order with
 *    MPI_ANY_SOURCE even when small and large messages are interleaved.
 */
#include "tap.h"

#define NSIZES 5
#define MAXLEN ((size_t)(1u << 20) + 13)
#define CANARY 0xCA7A11CEull

static const size_t sizes[NSIZES] = { 0, 1, 1000, 65536, MAXLEN };

static int rank, nprocs;
static unsigned char *sbuf, *rbuf;

/* A distinct pattern seed for each message of each test. */
static uint64_t seed_of(int test, int src, int dst, int idx)
{
    return ((uint64_t)test << 48) | ((uint64_t)src << 36) |
           ((uint64_t)dst << 24) | (uint64_t)idx;
}

/* rbuf always holds the canary pattern outside the bytes the previous
 * receive wrote; restoring only those keeps large buffers cheap. */
static size_t rbuf_dirty = MAXLEN;

static void rbuf_restore(void)
{
    for (size_t i = 0; i < rbuf_dirty; i++)
        rbuf[i] = tap_pattern_byte(CANARY, i);
    rbuf_dirty = 0;
}

/* Receive into rbuf with its full capacity MAXLEN. */
static int recv_msg(int src, int tag, MPI_Status *st, int *count)
{
    int ok = 1;

    rbuf_restore();
    rbuf_dirty = MAXLEN;
    *count = -1;
    ok &= mpi_ok(MPI_Recv(rbuf, (int)MAXLEN, MPI_BYTE, src, tag,
                          MPI_COMM_WORLD, st), "MPI_Recv");
    ok &= mpi_ok(MPI_Get_count(st, MPI_BYTE, count), "MPI_Get_count");
    return ok;
}

/* The received message matches (source, tag, length, payload) and the
 * GUARD bytes after it still hold the canary. */
#define GUARD 4096
static int verify_msg(const MPI_Status *st, int count, int src, int tag,
                      size_t len, uint64_t seed)
{
    if (st->MPI_SOURCE != src || st->MPI_TAG != tag) {
        tap_diag("status source/tag %d/%d, expected %d/%d",
                 st->MPI_SOURCE, st->MPI_TAG, src, tag);
        return 0;
    }
    if (count < 0 || (size_t)count != len) {
        tap_diag("count %d from %d, expected %zu", count, src, len);
        return 0;
    }
    if (!tap_check(rbuf, len, seed)) {
        tap_diag("payload of %zu bytes from %d corrupted", len, src);
        return 0;
    }
    size_t end = len + GUARD < MAXLEN ? len + GUARD : MAXLEN;
    for (size_t i = len; i < end; i++) {
        if (rbuf[i] != tap_pattern_byte(CANARY, i)) {
            tap_diag("receive buffer overwritten at byte %zu (len %zu)", i, len);
            return 0;
        }
    }
    rbuf_dirty = len;
    return 1;
}

static int send_msg(int dst, int tag, size_t len, uint64_t seed)
{
    tap_fill(sbuf, len, seed);
    return mpi_ok(MPI_Send(sbuf, (int)len, MPI_BYTE, dst, tag, MPI_COMM_WORLD),
                  "MPI_Send");
}

/* Ring: rank 0 sends first, everyone else receives then forwards its own. */
static int ring(int k, int tag_base)
{
    int next = (rank + 1) % nprocs, prev = (rank + nprocs - 1) % nprocs;
    int ok = 1, count = -1;
    MPI_Status st;

    if (rank == 0)
        ok &= send_msg(next, tag_base + rank, sizes[k], seed_of(1, rank, next, k));
    ok &= recv_msg(prev, tag_base + prev, &st, &count);
    ok &= verify_msg(&st, count, prev, tag_base + prev, sizes[k],
                     seed_of(1, prev, rank, k));
    if (rank != 0)
        ok &= send_msg(next, tag_base + rank, sizes[k], seed_of(1, rank, next, k));
    return ok;
}

static int pair_tag(int round, int src, int dst)
{
    return 10000 + round * 256 + src * 16 + dst;
}

static size_t pair_len(int round, int src, int dst)
{
    return sizes[(round + src + 2 * dst) % NSIZES];
}

/* Every rank in turn is the receiver of one message from each other rank.
 * wild: 0 explicit source/tag (received in descending source order),
 *       1 MPI_ANY_SOURCE + MPI_ANY_TAG,
 *       2 alternating (source, MPI_ANY_TAG) and (MPI_ANY_SOURCE, tag). */
static int all_pairs(int round, int wild)
{
    int ok = 1, test = 10 + wild;

    for (int root = 0; root < nprocs; root++) {
        if (rank != root) {
            ok &= send_msg(root, pair_tag(round, rank, root),
                           pair_len(round, rank, root),
                           seed_of(test, rank, root, round));
            continue;
        }
        int seen[64] = { 0 };
        for (int n = 0; n < nprocs - 1; n++) {
            MPI_Status st;
            int count = -1, src, tag;
            int want = nprocs - 1 - n;      /* descending, skipping root */

            if (want <= root)
                want--;
            if (wild == 0) {
                src = want;
                tag = pair_tag(round, want, root);
            } else if (wild == 1) {
                src = MPI_ANY_SOURCE;
                tag = MPI_ANY_TAG;
            } else if (want % 2) {
                src = want;
                tag = MPI_ANY_TAG;
            } else {
                src = MPI_ANY_SOURCE;
                tag = pair_tag(round, want, root);
            }
            ok &= recv_msg(src, tag, &st, &count);
            int s = wild == 1 ? st.MPI_SOURCE : want;
            if (s < 0 || s >= nprocs || s == root || seen[s]) {
                tap_diag("unexpected source %d at root %d", st.MPI_SOURCE, root);
                ok = 0;
                continue;
            }
            seen[s] = 1;
            ok &= verify_msg(&st, count, s, pair_tag(round, s, root),
                             pair_len(round, s, root),
                             seed_of(test, s, root, round));
        }
    }
    return ok;
}

/* The largest legal tag works for a send and a specific receive. */
static int tag_ub_ring(void)
{
    int *ub = NULL, flag = 0, ok = 1;

    ok &= mpi_ok(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag),
                 "MPI_Comm_get_attr(MPI_TAG_UB)");
    if (!flag || !ub || *ub < 32767) {
        tap_diag("MPI_TAG_UB missing or below 32767");
        return 0;
    }
    int next = (rank + 1) % nprocs, prev = (rank + nprocs - 1) % nprocs;
    int count = -1;
    MPI_Status st;

    if (rank == 0)
        ok &= send_msg(next, *ub, 777, seed_of(20, rank, next, 0));
    ok &= recv_msg(prev, *ub, &st, &count);
    ok &= verify_msg(&st, count, prev, *ub, 777, seed_of(20, prev, rank, 0));
    if (rank != 0)
        ok &= send_msg(next, *ub, 777, seed_of(20, rank, next, 0));
    return ok;
}

#define NORDER 10
static const size_t order_sizes[NORDER] = {
    1, MAXLEN, 0, 1000, 65536, 7, 300001, 2, MAXLEN, 64
};

/* Every other rank sends NORDER messages on one tag to rank 0, which
 * receives them all with MPI_ANY_SOURCE: per sender, order is preserved. */
static int ordering(void)
{
    const int tag = 42;
    int ok = 1;

    if (rank != 0) {
        for (int i = 0; i < NORDER; i++) {
            size_t len = order_sizes[(i + rank) % NORDER];
            ok &= send_msg(0, tag, len, seed_of(30, rank, 0, i));
        }
        return ok;
    }
    int next_seq[64] = { 0 };
    for (int n = 0; n < NORDER * (nprocs - 1); n++) {
        MPI_Status st;
        int count = -1;

        ok &= recv_msg(MPI_ANY_SOURCE, tag, &st, &count);
        int s = st.MPI_SOURCE;
        if (s <= 0 || s >= nprocs || next_seq[s] >= NORDER) {
            tap_diag("unexpected source %d", s);
            ok = 0;
            continue;
        }
        int i = next_seq[s]++;
        if (!verify_msg(&st, count, s, tag, order_sizes[(i + s) % NORDER],
                        seed_of(30, s, 0, i))) {
            tap_diag("message %d from rank %d out of order or corrupted", i, s);
            ok = 0;
        }
    }
    for (int s = 1; s < nprocs; s++)
        if (next_seq[s] != NORDER)
            ok = 0;
    return ok;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    sbuf = malloc(MAXLEN);
    rbuf = malloc(MAXLEN);
    if (nprocs < 2 || nprocs > 64)
        MPI_Abort(MPI_COMM_WORLD, 2);

    tap_plan(3 * NSIZES + 4);
    tap_ok(nprocs == 4 && sbuf && rbuf, "4 ranks and buffers available");
    for (int k = 0; k < NSIZES; k++)
        tap_ok(ring(k, 100 + 16 * k),
               "ring Send/Recv with explicit source and tag, %zu bytes", sizes[k]);
    for (int r = 0; r < NSIZES; r++)
        tap_ok(all_pairs(r, 0),
               "all-pairs Send/Recv with explicit source and tag, round %d", r);
    for (int r = 0; r < NSIZES; r++)
        tap_ok(all_pairs(r, 1),
               "all-pairs Recv with MPI_ANY_SOURCE/MPI_ANY_TAG, round %d", r);
    tap_ok(all_pairs(NSIZES, 2),
           "all-pairs Recv with one wildcard (source+ANY_TAG, ANY_SOURCE+tag)");
    tap_ok(tag_ub_ring(), "ring with tag MPI_TAG_UB");
    tap_ok(ordering(),
           "one sender, one tag, mixed sizes: ANY_SOURCE receives in send order");

    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return tap_status();
}
