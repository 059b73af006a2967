/* ftw-test: np=4 mode=both timeout=60 */
/*
 * p2p_modes - the send modes and combined send-receive are transparent.
 *
 * Asserts, with payloads of 0 .. 1 MiB + 13 bytes checked byte for byte:
 *  - MPI_Ssend delivers, and MPI_Issend is synchronous: it does not
 *    complete while the receiver has not yet posted its receive;
 *  - MPI_Bsend and MPI_Ibsend complete locally: every rank buffers a message
 *    to every other rank before any receive is posted, with a buffer sized
 *    by MPI_Pack_size + MPI_BSEND_OVERHEAD, and MPI_Buffer_detach returns
 *    the attached address and size;
 *  - MPI_Rsend and MPI_Irsend deliver to receives posted before a barrier;
 *  - MPI_Issend delivers to receives posted after it;
 *  - MPI_Sendrecv (ring, unequal send/receive sizes, MPI_ANY_SOURCE, self)
 *    and MPI_Sendrecv_replace deliver with correct statuses.
 */
#include "tap.h"

#define NSIZES 5
#define MAXLEN ((size_t)(1u << 20) + 13)
#define CANARY 0x3D3D3Dull

static const size_t sizes[NSIZES] = { 0, 1, 1000, 65536, MAXLEN };

static int rank, nprocs;

static uint64_t seed_of(int test, int src, int dst, int idx)
{
    return ((uint64_t)test << 48) | ((uint64_t)src << 36) |
           ((uint64_t)dst << 24) | (uint64_t)idx;
}

static int pair_tag(int test, int src, int dst)
{
    return 700 + test * 64 + src * 8 + dst;
}

static size_t pair_len(int test, int src, int dst)
{
    return sizes[(test + src + 2 * dst) % NSIZES];
}

/* A receive buffer of len bytes plus a canary byte; verify status and data. */
static int verify_recv(const unsigned char *buf, size_t len, const MPI_Status *st,
                       int src, int tag, uint64_t seed)
{
    int count = -1;

    if (!mpi_ok(MPI_Get_count(st, MPI_BYTE, &count), "MPI_Get_count"))
        return 0;
    if (st->MPI_SOURCE != src || st->MPI_TAG != tag || count < 0 ||
        (size_t)count != len) {
        tap_diag("status %d/%d/%d, expected %d/%d/%zu", st->MPI_SOURCE,
                 st->MPI_TAG, count, src, tag, len);
        return 0;
    }
    if (!tap_check(buf, len, seed)) {
        tap_diag("payload of %zu bytes from %d corrupted", len, src);
        return 0;
    }
    if (buf[len] != tap_pattern_byte(CANARY, len)) {
        tap_diag("byte after the message overwritten");
        return 0;
    }
    return 1;
}

/* ---- all-pairs exchange driven by a send mode ---- */

enum mode { BSEND, IBSEND, RSEND, IRSEND, ISSEND };

struct peers {
    unsigned char *out[64], *in[64];
    MPI_Request sreq[64], rreq[64];
    MPI_Status rst[64];
};

static void peers_init(struct peers *p, int test)
{
    for (int q = 0; q < nprocs; q++) {
        p->sreq[q] = p->rreq[q] = MPI_REQUEST_NULL;
        p->out[q] = p->in[q] = NULL;
        if (q == rank)
            continue;
        size_t olen = pair_len(test, rank, q), ilen = pair_len(test, q, rank);
        p->out[q] = malloc(olen + 1);
        p->in[q] = malloc(ilen + 1);
        tap_fill(p->out[q], olen, seed_of(test, rank, q, 0));
        tap_fill(p->in[q], ilen + 1, CANARY);
    }
}

static void peers_free(struct peers *p)
{
    for (int q = 0; q < nprocs; q++) {
        free(p->out[q]);
        free(p->in[q]);
    }
}

static int post_recvs(struct peers *p, int test)
{
    int ok = 1;

    for (int q = 0; q < nprocs; q++)
        if (q != rank)
            ok &= mpi_ok(MPI_Irecv(p->in[q], (int)pair_len(test, q, rank) + 1,
                                   MPI_BYTE, q, pair_tag(test, q, rank),
                                   MPI_COMM_WORLD, &p->rreq[q]), "MPI_Irecv");
    return ok;
}

static int send_all(struct peers *p, int test, enum mode m)
{
    static const char *names[] = { "MPI_Bsend", "MPI_Ibsend", "MPI_Rsend",
                                   "MPI_Irsend", "MPI_Issend" };
    int ok = 1;

    for (int i = 1; i < nprocs; i++) {
        int q = (rank + i) % nprocs, tag = pair_tag(test, rank, q);
        int len = (int)pair_len(test, rank, q), rc = MPI_SUCCESS;

        switch (m) {
        case BSEND:
            rc = MPI_Bsend(p->out[q], len, MPI_BYTE, q, tag, MPI_COMM_WORLD);
            break;
        case IBSEND:
            rc = MPI_Ibsend(p->out[q], len, MPI_BYTE, q, tag, MPI_COMM_WORLD,
                            &p->sreq[q]);
            break;
        case RSEND:
            rc = MPI_Rsend(p->out[q], len, MPI_BYTE, q, tag, MPI_COMM_WORLD);
            break;
        case IRSEND:
            rc = MPI_Irsend(p->out[q], len, MPI_BYTE, q, tag, MPI_COMM_WORLD,
                            &p->sreq[q]);
            break;
        case ISSEND:
            rc = MPI_Issend(p->out[q], len, MPI_BYTE, q, tag, MPI_COMM_WORLD,
                            &p->sreq[q]);
            break;
        }
        ok &= mpi_ok(rc, names[m]);
    }
    return ok;
}

static int wait_sends(struct peers *p)
{
    MPI_Status st[64];

    return mpi_ok(MPI_Waitall(nprocs, p->sreq, st), "MPI_Waitall(sends)");
}

static int wait_verify_recvs(struct peers *p, int test)
{
    int ok = mpi_ok(MPI_Waitall(nprocs, p->rreq, p->rst), "MPI_Waitall(recvs)");

    for (int q = 0; q < nprocs; q++)
        if (q != rank)
            ok &= verify_recv(p->in[q], pair_len(test, q, rank), &p->rst[q], q,
                              pair_tag(test, q, rank), seed_of(test, q, rank, 0));
    return ok;
}

/* Buffered sends: all sends complete before any receive is posted. */
static int buffered(int test, enum mode m)
{
    struct peers p;
    int ok = 1, total = 0;

    peers_init(&p, test);
    for (int q = 0; q < nprocs; q++) {
        int sz = 0;

        if (q == rank)
            continue;
        ok &= mpi_ok(MPI_Pack_size((int)pair_len(test, rank, q), MPI_BYTE,
                                   MPI_COMM_WORLD, &sz), "MPI_Pack_size");
        total += sz + MPI_BSEND_OVERHEAD;
    }
    void *attached = malloc((size_t)total);
    ok &= mpi_ok(MPI_Buffer_attach(attached, total), "MPI_Buffer_attach");

    ok &= send_all(&p, test, m);
    if (m == IBSEND)
        ok &= wait_sends(&p);
    /* The send buffers may be reused at once: scribble over them. */
    for (int q = 0; q < nprocs; q++)
        if (q != rank)
            memset(p.out[q], 0xEE, pair_len(test, rank, q) + 1);
    ok &= mpi_ok(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");

    ok &= post_recvs(&p, test);
    ok &= wait_verify_recvs(&p, test);

    void *detached = NULL;
    int dsize = -1;
    ok &= mpi_ok(MPI_Buffer_detach(&detached, &dsize), "MPI_Buffer_detach");
    if (detached != attached || dsize != total) {
        tap_diag("MPI_Buffer_detach returned %p/%d, attached %p/%d", detached,
                 dsize, attached, total);
        ok = 0;
    }
    free(attached);
    peers_free(&p);
    return ok;
}

/* Ready sends: every receive is posted before the barrier. */
static int ready(int test, enum mode m)
{
    struct peers p;
    int ok = 1;

    peers_init(&p, test);
    ok &= post_recvs(&p, test);
    ok &= mpi_ok(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    ok &= send_all(&p, test, m);
    ok &= wait_verify_recvs(&p, test);
    ok &= wait_sends(&p);
    peers_free(&p);
    return ok;
}

/* Synchronous nonblocking sends posted before the receives. */
static int issend_all(int test)
{
    struct peers p;
    int ok = 1;

    peers_init(&p, test);
    ok &= send_all(&p, test, ISSEND);
    ok &= post_recvs(&p, test);
    ok &= wait_verify_recvs(&p, test);
    ok &= wait_sends(&p);
    peers_free(&p);
    return ok;
}

/* ---- synchronous mode ---- */

static int ssend_ring(void)
{
    int next = (rank + 1) % nprocs, prev = (rank + nprocs - 1) % nprocs;
    unsigned char *out = malloc(MAXLEN + 1), *in = malloc(MAXLEN + 1);
    int ok = 1;

    for (int k = 0; k < NSIZES; k++) {
        MPI_Status st;
        int tag = 40 + k;

        tap_fill(out, sizes[k], seed_of(1, rank, next, k));
        tap_fill(in, sizes[k] + 1, CANARY);
        if (rank == 0)
            ok &= mpi_ok(MPI_Ssend(out, (int)sizes[k], MPI_BYTE, next, tag,
                                   MPI_COMM_WORLD), "MPI_Ssend");
        ok &= mpi_ok(MPI_Recv(in, (int)sizes[k] + 1, MPI_BYTE, prev, tag,
                              MPI_COMM_WORLD, &st), "MPI_Recv");
        ok &= verify_recv(in, sizes[k], &st, prev, tag, seed_of(1, prev, rank, k));
        if (rank != 0)
            ok &= mpi_ok(MPI_Ssend(out, (int)sizes[k], MPI_BYTE, next, tag,
                                   MPI_COMM_WORLD), "MPI_Ssend");
    }
    free(out);
    free(in);
    return ok;
}

/* next posts its receive only after a barrier this rank has not entered,
 * so the MPI_Issend cannot have completed before it. */
static int issend_is_synchronous(void)
{
    int next = (rank + 1) % nprocs, prev = (rank + nprocs - 1) % nprocs;
    unsigned char out[16], in[17];
    MPI_Request req;
    MPI_Status st;
    int ok = 1, flag = -1;

    tap_fill(out, sizeof out, seed_of(2, rank, next, 0));
    tap_fill(in, sizeof in, CANARY);
    ok &= mpi_ok(MPI_Issend(out, sizeof out, MPI_BYTE, next, 50, MPI_COMM_WORLD,
                            &req), "MPI_Issend");
    for (int i = 0; i < 20 && ok; i++)
        ok &= mpi_ok(MPI_Test(&req, &flag, MPI_STATUS_IGNORE), "MPI_Test");
    if (flag != 0) {
        tap_diag("MPI_Issend completed before the receive was posted");
        ok = 0;
    }
    ok &= mpi_ok(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    ok &= mpi_ok(MPI_Recv(in, sizeof in, MPI_BYTE, prev, 50, MPI_COMM_WORLD, &st),
                 "MPI_Recv");
    ok &= verify_recv(in, sizeof out, &st, prev, 50, seed_of(2, prev, rank, 0));
    ok &= mpi_ok(MPI_Wait(&req, MPI_STATUS_IGNORE), "MPI_Wait");
    return ok;
}

/* ---- combined send-receive ---- */

static int sendrecv_ring(void)
{
    int next = (rank + 1) % nprocs, prev = (rank + nprocs - 1) % nprocs;
    unsigned char *out = malloc(MAXLEN + 1), *in = malloc(MAXLEN + 1);
    int ok = 1;

    for (int k = 0; k < NSIZES; k++) {
        /* rank r sends sizes[(k + r) % NSIZES]: send and receive sizes differ */
        size_t olen = sizes[(k + rank) % NSIZES], ilen = sizes[(k + prev) % NSIZES];
        int src = k % 2 ? MPI_ANY_SOURCE : prev, tag = 60 + k;
        MPI_Status st;

        tap_fill(out, olen, seed_of(3, rank, next, k));
        tap_fill(in, ilen + 1, CANARY);
        ok &= mpi_ok(MPI_Sendrecv(out, (int)olen, MPI_BYTE, next, tag, in,
                                  (int)ilen + 1, MPI_BYTE, src,
                                  k % 2 ? MPI_ANY_TAG : tag, MPI_COMM_WORLD, &st),
                     "MPI_Sendrecv");
        ok &= verify_recv(in, ilen, &st, prev, tag, seed_of(3, prev, rank, k));
    }
    free(out);
    free(in);
    return ok;
}

static int sendrecv_self(void)
{
    unsigned char out[5000], in[5001];
    MPI_Status st;
    int ok = 1;

    tap_fill(out, sizeof out, seed_of(4, rank, rank, 0));
    tap_fill(in, sizeof in, CANARY);
    ok &= mpi_ok(MPI_Sendrecv(out, sizeof out, MPI_BYTE, rank, 65, in, sizeof in,
                              MPI_BYTE, rank, 65, MPI_COMM_WORLD, &st),
                 "MPI_Sendrecv(self)");
    ok &= verify_recv(in, sizeof out, &st, rank, 65, seed_of(4, rank, rank, 0));
    return ok;
}

static int sendrecv_replace(void)
{
    int next = (rank + 1) % nprocs, prev = (rank + nprocs - 1) % nprocs;
    unsigned char *buf = malloc(MAXLEN + 1);
    int ok = 1;

    for (int k = 0; k < NSIZES; k++) {
        MPI_Status st;
        int tag = 70 + k;

        tap_fill(buf, sizes[k], seed_of(5, rank, next, k));
        buf[sizes[k]] = tap_pattern_byte(CANARY, sizes[k]);
        ok &= mpi_ok(MPI_Sendrecv_replace(buf, (int)sizes[k], MPI_BYTE, next, tag,
                                          prev, tag, MPI_COMM_WORLD, &st),
                     "MPI_Sendrecv_replace");
        ok &= verify_recv(buf, sizes[k], &st, prev, tag, seed_of(5, prev, rank, k));
    }
    free(buf);
    return ok;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (nprocs < 2 || nprocs > 64)
        MPI_Abort(MPI_COMM_WORLD, 2);

    tap_plan(12);
    tap_ok(ssend_ring(), "MPI_Ssend ring, 0 .. 1 MiB+13 bytes");
    tap_ok(issend_is_synchronous(),
           "MPI_Issend does not complete before the receive is posted");
    tap_ok(issend_all(10), "MPI_Issend all-pairs, receives posted afterwards");
    tap_ok(buffered(11, BSEND),
           "MPI_Bsend all-pairs completes locally; detach returns the buffer");
    tap_ok(buffered(12, BSEND), "MPI_Bsend all-pairs, second size pattern");
    tap_ok(buffered(13, IBSEND),
           "MPI_Ibsend all-pairs completes locally; detach returns the buffer");
    tap_ok(ready(14, RSEND), "MPI_Rsend all-pairs to receives posted before a barrier");
    tap_ok(ready(15, IRSEND), "MPI_Irsend all-pairs to receives posted before a barrier");
    tap_ok(ready(16, RSEND), "MPI_Rsend all-pairs, second size pattern");
    tap_ok(sendrecv_ring(),
           "MPI_Sendrecv ring with unequal sizes, explicit and wildcard receive");
    tap_ok(sendrecv_self(), "MPI_Sendrecv to self");
    tap_ok(sendrecv_replace(), "MPI_Sendrecv_replace ring, 0 .. 1 MiB+13 bytes");

    MPI_Finalize();
    return tap_status();
}
