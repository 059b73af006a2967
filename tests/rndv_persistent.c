/* ftw-test: np=2 mode=both timeout=120 env=FTW_RNDV_THRESHOLD=64k env=FTW_XPORT=auto */
/*
 * rndv_persistent - persistent sends at or above the rendezvous threshold
 * (64 KiB here) restarted many times, with the data changed between
 * starts; natively the same assertions hold (transparency).  Under ftwrap
 * each start is a rendezvous round: the receiver pulled every such
 * message (FTW_Stat_get; skipped natively), and none below it.
 *
 * Asserts, every payload checked byte for byte against the pattern of its
 * own round, the byte after it untouched:
 *  - MPI_Send_init, MPI_Ssend_init, MPI_Rsend_init (the receive posted
 *    first, a token sent) and, on an MPI-4 library, MPI_Send_init_c, of
 *    1000 B, 64 KiB, 256 KiB + 3, 1 MiB + 7 and 4 MiB + 1, each started 9
 *    times, each round completed by another call (MPI_Wait, Test, Waitall,
 *    Testall, Waitany, Testany, Waitsome, Testsome, Request_get_status
 *    then Wait): success, the handle the same after every round; a wait
 *    on the inactive request returns at once with an empty status;
 *    MPI_Request_free sets it to MPI_REQUEST_NULL; the receiver's status
 *    gives source, tag and the real size (persistent and plain receives
 *    alternate);
 *  - a strided send (MPI_Type_vector, 1 MiB of data) whose type is freed
 *    after MPI_Send_init: each round delivers that round's blocks, the
 *    receiver's gaps untouched;
 *  - MPI_Startall over a mix (a 1 MiB + 11 and a 1000 B persistent send
 *    and their two persistent receives, both ranks at once), 6 rounds,
 *    completed by MPI_Waitall and by an MPI_Testall loop;
 *  - MPI_Request_free of a started 2 MiB + 1 send before its receiver
 *    posts the receive (0.3 s later): the message arrives intact;
 *  - the receiver pulled exactly the rounds at or above the threshold.
 */
#include "tap.h"

#include <stdlib.h>
#include <string.h>

#define THRESHOLD (64 << 10)
#define NSIZES 5
#define ITERS 9
#define MAXLEN ((size_t)(4 << 20) + 1)
#define CANARY 0x5a5a11ull
#define TOKEN_TAG 99

static const size_t sizes[NSIZES] = { 1000, THRESHOLD, (256 << 10) + 3,
                                      (1 << 20) + 7, (4 << 20) + 1 };

enum mode { SEND, SSEND, RSEND, SEND_C, NMODES };
static const char *const mode_name[] = { "MPI_Send_init", "MPI_Ssend_init",
                                         "MPI_Rsend_init",
                                         "MPI_Send_init_c" };

static int rank;
static unsigned char *sbuf, *rbuf;
static long long expect_pulls;  /* rounds rank 1 must have pulled */

static uint64_t seed_of(int test, int a, int it)
{
    return ((uint64_t)test << 48) | ((uint64_t)a << 24) | (uint64_t)it;
}

static int have_mode(enum mode m)
{
#if MPI_VERSION >= 4
    (void)m;
    return 1;
#else
    return m != SEND_C;
#endif
}

static int send_init(enum mode m, void *buf, size_t len, MPI_Request *req)
{
    int n = (int)len;

    switch (m) {
    case SEND:
        return MPI_Send_init(buf, n, MPI_BYTE, 1, m, MPI_COMM_WORLD, req);
    case SSEND:
        return MPI_Ssend_init(buf, n, MPI_BYTE, 1, m, MPI_COMM_WORLD, req);
    case RSEND:
        return MPI_Rsend_init(buf, n, MPI_BYTE, 1, m, MPI_COMM_WORLD, req);
    default:
#if MPI_VERSION >= 4
        return MPI_Send_init_c(buf, (MPI_Count)len, MPI_BYTE, 1, m,
                               MPI_COMM_WORLD, req);
#else
        return MPI_ERR_OTHER;
#endif
    }
}

/* Complete *req with the completion call number how. */
static int complete(MPI_Request *req, int how, MPI_Status *st)
{
    int rc = MPI_SUCCESS, flag = 0, idx = -1, n = 0;

    switch (how % 9) {
    case 0:
        return MPI_Wait(req, st);
    case 1:
        while (rc == MPI_SUCCESS && !flag)
            rc = MPI_Test(req, &flag, st);
        return rc;
    case 2:
        return MPI_Waitall(1, req, st);
    case 3:
        while (rc == MPI_SUCCESS && !flag)
            rc = MPI_Testall(1, req, &flag, st);
        return rc;
    case 4:
        rc = MPI_Waitany(1, req, &idx, st);
        return rc == MPI_SUCCESS && idx != 0 ? MPI_ERR_OTHER : rc;
    case 5:
        while (rc == MPI_SUCCESS && !flag)
            rc = MPI_Testany(1, req, &idx, &flag, st);
        return rc == MPI_SUCCESS && idx != 0 ? MPI_ERR_OTHER : rc;
    case 6:
        rc = MPI_Waitsome(1, req, &n, &idx, st);
        return rc == MPI_SUCCESS && (n != 1 || idx != 0) ? MPI_ERR_OTHER
                                                         : rc;
    case 7:
        while (rc == MPI_SUCCESS && n == 0)
            rc = MPI_Testsome(1, req, &n, &idx, st);
        return rc == MPI_SUCCESS && (n != 1 || idx != 0) ? MPI_ERR_OTHER
                                                         : rc;
    default:
        while (rc == MPI_SUCCESS && !flag)
            rc = MPI_Request_get_status(*req, &flag, st);
        return rc == MPI_SUCCESS ? MPI_Wait(req, st) : rc;
    }
}

static int empty_status(const MPI_Status *st)
{
    int count = -1;

    MPI_Get_count(st, MPI_BYTE, &count);
    return st->MPI_SOURCE == MPI_ANY_SOURCE && st->MPI_TAG == MPI_ANY_TAG &&
           count == 0;
}

/* Rank 1's check of one message: status, pattern, the byte after. */
static int check_msg(const unsigned char *buf, size_t len,
                     const MPI_Status *st, int src, int tag, uint64_t seed)
{
    int count = -1;

    MPI_Get_count(st, MPI_BYTE, &count);
    if (st->MPI_SOURCE != src || st->MPI_TAG != tag || count < 0 ||
        (size_t)count != len) {
        tap_diag("status %d/%d/%d, expected %d/%d/%zu", st->MPI_SOURCE,
                 st->MPI_TAG, count, src, tag, len);
        return 0;
    }
    if (!tap_check(buf, len, seed)) {
        tap_diag("%zu bytes from %d: corrupted", len, src);
        return 0;
    }
    if (buf[len] != tap_pattern_byte(CANARY, 0)) {
        tap_diag("the byte after %zu bytes was overwritten", len);
        return 0;
    }
    return 1;
}

/* One mode and size: ITERS rounds of one persistent send. */
static int rounds(enum mode m, size_t len)
{
    MPI_Request req = MPI_REQUEST_NULL, held, rreq;
    MPI_Status st;
    int ok = 1, token = 0;

    if (rank == 0) {
        ok &= mpi_ok(send_init(m, sbuf, len, &req), mode_name[m]);
        held = req;
        for (int it = 0; ok && it < ITERS; it++) {
            if (m == RSEND)
                ok &= mpi_ok(MPI_Recv(&token, 1, MPI_INT, 1, TOKEN_TAG,
                                     MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                            "MPI_Recv(token)");
            tap_fill(sbuf, len, seed_of(1 + m, (int)len, it));
            ok &= mpi_ok(MPI_Start(&req), "MPI_Start");
            ok &= mpi_ok(complete(&req, it, &st), "completion");
            if (req != held) {
                tap_diag("%s: the handle changed in round %d", mode_name[m],
                         it);
                ok = 0;
            }
        }
        ok &= mpi_ok(MPI_Wait(&req, &st), "MPI_Wait(inactive)");
        if (req != held || !empty_status(&st)) {
            tap_diag("a wait on the inactive request: handle %s, status "
                     "%d/%d", req == held ? "kept" : "changed",
                     st.MPI_SOURCE, st.MPI_TAG);
            ok = 0;
        }
        ok &= mpi_ok(MPI_Request_free(&req), "MPI_Request_free");
        ok &= req == MPI_REQUEST_NULL;
        return ok;
    }
    ok &= mpi_ok(MPI_Recv_init(rbuf, (int)len + 1, MPI_BYTE, 0, m,
                              MPI_COMM_WORLD, &rreq), "MPI_Recv_init");
    for (int it = 0; ok && it < ITERS; it++) {
        MPI_Request r = MPI_REQUEST_NULL;

        memset(rbuf, 0, len);
        rbuf[len] = tap_pattern_byte(CANARY, 0);
        if (it % 2 == 0) {
            ok &= mpi_ok(MPI_Start(&rreq), "MPI_Start(recv)");
            r = rreq;
        } else {
            ok &= mpi_ok(MPI_Irecv(rbuf, (int)len + 1, MPI_BYTE, 0, m,
                                  MPI_COMM_WORLD, &r), "MPI_Irecv");
        }
        if (m == RSEND)
            ok &= mpi_ok(MPI_Send(&token, 1, MPI_INT, 0, TOKEN_TAG,
                                 MPI_COMM_WORLD), "MPI_Send(token)");
        ok &= mpi_ok(MPI_Wait(&r, &st), "MPI_Wait(recv)");
        ok &= check_msg(rbuf, len, &st, 0, m, seed_of(1 + m, (int)len, it));
    }
    ok &= mpi_ok(MPI_Request_free(&rreq), "MPI_Request_free(recv)");
    if (len >= THRESHOLD)
        expect_pulls += ITERS;
    return ok;
}

/* A strided 1 MiB send whose type is freed after MPI_Send_init. */
#define VBLOCKS 4096
#define VBLEN 256
#define VSTRIDE 384

static int vector_rounds(void)
{
    MPI_Datatype vec;
    MPI_Request req;
    MPI_Status st;
    size_t span = (size_t)(VBLOCKS - 1) * VSTRIDE + VBLEN;
    int ok = 1;

    MPI_Type_vector(VBLOCKS, VBLEN, VSTRIDE, MPI_BYTE, &vec);
    MPI_Type_commit(&vec);
    if (rank == 0) {
        ok &= mpi_ok(MPI_Send_init(sbuf, 1, vec, 1, 20, MPI_COMM_WORLD, &req),
                    "MPI_Send_init(vector)");
        MPI_Type_free(&vec);    /* the request keeps what it needs */
        for (int it = 0; ok && it < ITERS; it++) {
            tap_fill(sbuf, span, seed_of(20, 0, it));
            ok &= mpi_ok(MPI_Start(&req), "MPI_Start(vector)");
            ok &= mpi_ok(complete(&req, it, &st), "completion(vector)");
        }
        ok &= mpi_ok(MPI_Request_free(&req), "MPI_Request_free(vector)");
        return ok;
    }
    for (int it = 0; ok && it < ITERS; it++) {
        tap_fill(rbuf, span, CANARY);
        ok &= mpi_ok(MPI_Recv(rbuf, 1, vec, 0, 20, MPI_COMM_WORLD, &st),
                    "MPI_Recv(vector)");
        for (size_t i = 0; ok && i < span; i++) {
            int in_block = i % VSTRIDE < VBLEN;
            uint8_t want = in_block ? tap_pattern_byte(seed_of(20, 0, it), i)
                                    : tap_pattern_byte(CANARY, i);

            if (rbuf[i] != want) {
                tap_diag("vector round %d: byte %zu (%s) wrong", it, i,
                         in_block ? "data" : "gap");
                ok = 0;
            }
        }
    }
    MPI_Type_free(&vec);
    expect_pulls += ITERS;
    return ok;
}

/* MPI_Startall over two sends and two receives, both ranks at once. */
#define MIXBIG ((size_t)(1 << 20) + 11)
#define MIXSMALL ((size_t)1000)

static int startall_mix(void)
{
    int other = 1 - rank, ok = 1;
    unsigned char *sb = sbuf, *ss = sbuf + MIXBIG;
    unsigned char *rb = rbuf, *rs = rbuf + MIXBIG + 1;
    MPI_Request reqs[4], held[4];
    MPI_Status st[4];

    ok &= mpi_ok(MPI_Send_init(sb, (int)MIXBIG, MPI_BYTE, other, 30,
                              MPI_COMM_WORLD, &reqs[0]), "MPI_Send_init");
    ok &= mpi_ok(MPI_Recv_init(rb, (int)MIXBIG + 1, MPI_BYTE, other, 30,
                              MPI_COMM_WORLD, &reqs[1]), "MPI_Recv_init");
    ok &= mpi_ok(MPI_Ssend_init(ss, (int)MIXSMALL, MPI_BYTE, other, 31,
                               MPI_COMM_WORLD, &reqs[2]), "MPI_Ssend_init");
    ok &= mpi_ok(MPI_Recv_init(rs, (int)MIXSMALL + 1, MPI_BYTE, other, 31,
                              MPI_COMM_WORLD, &reqs[3]), "MPI_Recv_init");
    memcpy(held, reqs, sizeof(reqs));
    for (int it = 0; ok && it < 6; it++) {
        int flag = 0;

        tap_fill(sb, MIXBIG, seed_of(30, rank, it));
        tap_fill(ss, MIXSMALL, seed_of(31, rank, it));
        memset(rb, 0, MIXBIG);
        memset(rs, 0, MIXSMALL);
        rb[MIXBIG] = rs[MIXSMALL] = tap_pattern_byte(CANARY, 0);
        ok &= mpi_ok(MPI_Startall(4, reqs), "MPI_Startall");
        if (it % 2 == 0)
            ok &= mpi_ok(MPI_Waitall(4, reqs, st), "MPI_Waitall");
        else
            while (ok && !flag)
                ok &= mpi_ok(MPI_Testall(4, reqs, &flag, st), "MPI_Testall");
        ok &= memcmp(held, reqs, sizeof(reqs)) == 0;
        ok &= check_msg(rb, MIXBIG, &st[1], other, 30,
                        seed_of(30, other, it));
        ok &= check_msg(rs, MIXSMALL, &st[3], other, 31,
                        seed_of(31, other, it));
    }
    for (int i = 0; i < 4; i++)
        ok &= mpi_ok(MPI_Request_free(&reqs[i]), "MPI_Request_free");
    if (rank == 1)
        expect_pulls += 6;
    return ok;
}

/* MPI_Request_free of a started send before its receive is posted. */
#define FREELEN ((size_t)(2 << 20) + 1)

static int free_active(void)
{
    MPI_Request req;
    MPI_Status st;
    int ok = 1, verdict = 0, token = 1;

    if (rank == 0) {
        tap_fill(sbuf, FREELEN, seed_of(40, 0, 0));
        ok &= mpi_ok(MPI_Send_init(sbuf, (int)FREELEN, MPI_BYTE, 1, 40,
                                  MPI_COMM_WORLD, &req), "MPI_Send_init");
        ok &= mpi_ok(MPI_Start(&req), "MPI_Start");
        ok &= mpi_ok(MPI_Request_free(&req), "MPI_Request_free(active)");
        ok &= req == MPI_REQUEST_NULL;
        ok &= mpi_ok(MPI_Send(&token, 1, MPI_INT, 1, 41, MPI_COMM_WORLD),
                    "MPI_Send(token)");
        /* The buffer stays the message's until the receiver has it. */
        ok &= mpi_ok(MPI_Recv(&verdict, 1, MPI_INT, 1, 42, MPI_COMM_WORLD,
                             MPI_STATUS_IGNORE), "MPI_Recv(verdict)");
        return ok && verdict;
    }
    ok &= mpi_ok(MPI_Recv(&token, 1, MPI_INT, 0, 41, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE), "MPI_Recv(token)");
    tap_spin(0.3);
    memset(rbuf, 0, FREELEN);
    rbuf[FREELEN] = tap_pattern_byte(CANARY, 0);
    ok &= mpi_ok(MPI_Recv(rbuf, (int)FREELEN + 1, MPI_BYTE, 0, 40,
                         MPI_COMM_WORLD, &st), "MPI_Recv");
    ok &= check_msg(rbuf, FREELEN, &st, 0, 40, seed_of(40, 0, 0));
    verdict = ok;
    MPI_Send(&verdict, 1, MPI_INT, 0, 42, MPI_COMM_WORLD);
    expect_pulls += 1;
    return ok;
}

int main(int argc, char **argv)
{
    long long before, after;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (!tap_need_size(2))
        return 0;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    sbuf = malloc(MAXLEN + 64);
    rbuf = malloc(MAXLEN + 64);
    if (sbuf == NULL || rbuf == NULL) {
        tap_diag("out of memory");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    tap_plan(NMODES * NSIZES + 4);
    before = tap_rndv_pulls();
    for (int m = 0; m < NMODES; m++) {
        for (int s = 0; s < NSIZES; s++) {
            if (!have_mode((enum mode)m)) {
                tap_ok(1, "%s # SKIP not an MPI-4 library", mode_name[m]);
                continue;
            }
            tap_ok(rounds((enum mode)m, sizes[s]), "%s of %zu B, %d starts "
                   "with new data, every completion call: intact, same "
                   "handle, inactive wait empty, freed", mode_name[m],
                   sizes[s], ITERS);
        }
    }
    tap_ok(vector_rounds(), "MPI_Send_init of a 1 MiB vector, type freed "
           "after init, %d starts: each round's blocks, gaps untouched",
           ITERS);
    tap_ok(startall_mix(), "MPI_Startall of 1 MiB + 11 and 1000 B sends "
           "and receives, 6 rounds, Waitall and Testall: intact");
    tap_ok(free_active(), "MPI_Request_free of a started 2 MiB + 1 send "
           "before its receive is posted: delivered intact");
    after = tap_rndv_pulls();
    if (before >= 0) {
        /* Rank 0 receives only the mix's large messages. */
        long long want = rank == 0 ? 6 : expect_pulls;
        int exact = after - before == want;

        if (!exact)
            tap_diag("rank %d: %lld pulls, %lld expected", rank,
                     after - before, want);
        tap_ok(exact, "every round at or above the threshold went through "
               "ftwrap's rendezvous (pulled), none below it");
    } else {
        tap_ok(1, "rounds went through ftwrap's rendezvous # SKIP native "
               "run");
    }
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return tap_status();
}
