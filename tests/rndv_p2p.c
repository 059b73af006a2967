/* ftw-test: np=2 mode=both timeout=120 env=FTW_RNDV_THRESHOLD=64k env=FTW_RNDV_CHUNK=1m env=FTW_XPORT=cma */
/*
 * rndv_p2p - point-to-point messages around and far above the rendezvous
 * threshold (64 KiB here) are delivered intact, in order, with the real
 * sizes; natively the same assertions hold (transparency).
 *
 * Asserts, every payload checked byte for byte against its pattern:
 *  - blocking Send/Recv of 1 B .. 64 MiB (odd sizes, just below, at and
 *    above the threshold), both directions; MPI_Get_count and
 *    MPI_Get_elements give the real size; the bytes after the message in
 *    the receive buffer are untouched;
 *  - eager and rendezvous messages from one sender with one tag, received
 *    with MPI_ANY_SOURCE/MPI_ANY_TAG into large buffers, arrive in send
 *    order with their real sizes;
 *  - a receive smaller than a rendezvous message (and one smaller than
 *    the RTS header) gives MPI_ERR_TRUNCATE, and the sender's MPI_Send
 *    returns MPI_SUCCESS;
 *  - a strided (MPI_Type_vector) send into a contiguous receive and a
 *    contiguous send into a strided receive deliver the right elements;
 *  - 64 outstanding MPI_Isend and 64 MPI_Irecv in each direction complete
 *    with MPI_Waitall, and again with MPI_Testall / MPI_Waitsome loops;
 *  - MPI_Ssend and MPI_Issend of 1 MiB + 3 deliver;
 *  - a persistent receive (MPI_Recv_init, MPI_Start x3) gets three
 *    rendezvous messages;
 *  - an MPI_Irecv of a rendezvous message freed at once (MPI_Request_free)
 *    still gets it: the sender's MPI_Send returns, and the data is there
 *    when the sender's later message says so;
 *  - MPI_Cancel of an MPI_Isend of a rendezvous message: either the send
 *    is cancelled and nothing arrives, or it is not and the message
 *    arrives intact (MPI lets a cancel fail); never both or neither.
 */
#include "tap.h"

#include <stdlib.h>
#include <string.h>

#define BIG ((size_t)64 << 20)
#define GUARD 64
#define NOUT 64
#define CANARY 0x5a5a5a5aull

static int rank, peer;
static unsigned char *sbuf, *rbuf;

static uint64_t seed_of(int test, int src, int idx)
{
    return ((uint64_t)test << 40) | ((uint64_t)src << 32) | (uint64_t)idx;
}

static int ok_rc(int rc, const char *what)
{
    if (rc != MPI_SUCCESS)
        tap_diag("%s failed with error %d", what, rc);
    return rc == MPI_SUCCESS;
}

/* One message of len bytes from rank 0 to 1 and back, blocking. */
static int exchange(size_t len, int idx)
{
    int ok = 1, count = -1;
    MPI_Count elems = -1;
    MPI_Status st;

    for (int src = 0; src < 2; src++) {
        if (rank == src) {
            tap_fill(sbuf, len, seed_of(1, src, idx));
            ok &= ok_rc(MPI_Send(sbuf, (int)len, MPI_BYTE, peer, idx,
                                 MPI_COMM_WORLD), "MPI_Send");
            continue;
        }
        tap_fill(rbuf + len, GUARD, CANARY);
        ok &= ok_rc(MPI_Recv(rbuf, (int)(len + GUARD), MPI_BYTE, peer, idx,
                             MPI_COMM_WORLD, &st), "MPI_Recv");
        MPI_Get_count(&st, MPI_BYTE, &count);
        MPI_Get_elements_x(&st, MPI_BYTE, &elems);
        if (count != (int)len || elems != (MPI_Count)len) {
            tap_diag("size %zu: count %d, elements %lld", len, count,
                     (long long)elems);
            ok = 0;
        }
        ok &= st.MPI_SOURCE == peer && st.MPI_TAG == idx;
        ok &= tap_check(rbuf, len, seed_of(1, src, idx));
        ok &= tap_check(rbuf + len, GUARD, CANARY);
    }
    return ok;
}

static int test_sizes(void)
{
    static const size_t sizes[] = { 1, 47, 48, 49, 1000, 65535, 65536,
                                    65537, 100003, (1 << 20) + 13,
                                    (8 << 20) - 1, BIG };
    int ok = 1;

    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        ok &= exchange(sizes[i], (int)i);
    return ok;
}

/* Rank 0 sends small, large, small, ... on one tag; rank 1 receives
 * with both wildcards. */
static int test_order(void)
{
    static const size_t lens[] = { 10, 200000, 48, 70000, 4096, 3 << 20, 1 };
    const int n = (int)(sizeof lens / sizeof lens[0]);
    int ok = 1, count;
    MPI_Request reqs[8];
    MPI_Status sts[8];
    size_t off = 0;
    MPI_Status st;

    for (int i = 0; i < n && rank == 0; i++) {
        tap_fill(sbuf + off, lens[i], seed_of(2, 0, i));
        ok &= ok_rc(MPI_Isend(sbuf + off, (int)lens[i], MPI_BYTE, 1, 7,
                              MPI_COMM_WORLD, &reqs[i]), "MPI_Isend");
        off += lens[i];
    }
    if (rank == 1) {
        MPI_Barrier(MPI_COMM_WORLD);
        for (int i = 0; i < n; i++) {
            ok &= ok_rc(MPI_Recv(rbuf, (int)BIG, MPI_BYTE, MPI_ANY_SOURCE,
                                 MPI_ANY_TAG, MPI_COMM_WORLD, &st),
                        "MPI_Recv(any)");
            MPI_Get_count(&st, MPI_BYTE, &count);
            ok &= count == (int)lens[i] && st.MPI_TAG == 7 &&
                  st.MPI_SOURCE == 0 &&
                  tap_check(rbuf, lens[i], seed_of(2, 0, i));
        }
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
        ok &= ok_rc(MPI_Waitall(n, reqs, sts), "MPI_Waitall");
    }
    return ok;
}

/* Receives too small for the message: MPI_ERR_TRUNCATE; sends succeed. */
static int test_truncate(void)
{
    static const size_t lens[] = { 300000, 70000 };
    static const int caps[] = { 100000, 16 };
    int ok = 1;

    for (int i = 0; i < 2; i++) {
        if (rank == 0) {
            tap_fill(sbuf, lens[i], seed_of(3, 0, i));
            ok &= ok_rc(MPI_Send(sbuf, (int)lens[i], MPI_BYTE, 1, 30 + i,
                                 MPI_COMM_WORLD), "MPI_Send(truncated)");
        } else {
            MPI_Status st;
            int rc = MPI_Recv(rbuf, caps[i], MPI_BYTE, 0, 30 + i,
                              MPI_COMM_WORLD, &st), cls = -1;

            MPI_Error_class(rc, &cls);
            if (cls != MPI_ERR_TRUNCATE) {
                tap_diag("receive of %zu into %d: class %d, not "
                         "MPI_ERR_TRUNCATE", lens[i], caps[i], cls);
                ok = 0;
            }
        }
    }
    return ok;
}

/* Every other double of 2*n, one way strided, the other way contiguous. */
static int test_vector(void)
{
    const int n = 100000;       /* 800 KB of data */
    double *wide = malloc(sizeof(double) * 2 * (size_t)n);
    double *tight = malloc(sizeof(double) * (size_t)n);
    MPI_Datatype vec;
    int ok = wide && tight;

    MPI_Type_vector(n, 1, 2, MPI_DOUBLE, &vec);
    MPI_Type_commit(&vec);
    for (int dir = 0; dir < 2 && ok; dir++) {
        for (int i = 0; i < 2 * n; i++)
            wide[i] = rank == dir ? i * 0.5 : -1.0;
        for (int i = 0; i < n; i++)
            tight[i] = rank == dir ? i * 4.0 : -1.0;
        if (rank == 0 && dir == 0) {
            ok &= ok_rc(MPI_Send(wide, 1, vec, 1, 40, MPI_COMM_WORLD), "vec");
        } else if (rank == 1 && dir == 0) {
            ok &= ok_rc(MPI_Recv(tight, n, MPI_DOUBLE, 0, 40, MPI_COMM_WORLD,
                                 MPI_STATUS_IGNORE), "recv tight");
            for (int i = 0; i < n; i++)
                ok &= tight[i] == (2 * i) * 0.5;
        } else if (rank == 1) {
            ok &= ok_rc(MPI_Send(tight, n, MPI_DOUBLE, 0, 41, MPI_COMM_WORLD),
                        "tight");
        } else {
            ok &= ok_rc(MPI_Recv(wide, 1, vec, 1, 41, MPI_COMM_WORLD,
                                 MPI_STATUS_IGNORE), "recv vec");
            for (int i = 0; i < 2 * n; i++)
                ok &= wide[i] == (i % 2 ? -1.0 : (i / 2) * 4.0);
        }
    }
    MPI_Type_free(&vec);
    free(wide);
    free(tight);
    return ok;
}

/* NOUT sends and NOUT receives outstanding in each direction; mode 0:
 * MPI_Waitall, 1: MPI_Testall loop, 2: MPI_Waitsome loop. */
static int test_many(int mode)
{
    const size_t len = 70001 + 4096 * (size_t)mode;
    MPI_Request req[2 * NOUT];
    MPI_Status st[2 * NOUT];
    int idx[2 * NOUT], ok = 1, flag = 0, left = 2 * NOUT, out = 0;

    for (int i = 0; i < NOUT; i++)
        ok &= ok_rc(MPI_Irecv(rbuf + i * len, (int)len, MPI_BYTE, peer, i,
                              MPI_COMM_WORLD, &req[i]), "MPI_Irecv");
    for (int i = 0; i < NOUT; i++) {
        tap_fill(sbuf + i * len, len, seed_of(5 + mode, rank, i));
        ok &= ok_rc(MPI_Isend(sbuf + i * len, (int)len, MPI_BYTE, peer, i,
                              MPI_COMM_WORLD, &req[NOUT + i]), "MPI_Isend");
    }
    if (mode == 0)
        ok &= ok_rc(MPI_Waitall(2 * NOUT, req, st), "MPI_Waitall");
    while (mode == 1 && !flag && ok)
        ok &= ok_rc(MPI_Testall(2 * NOUT, req, &flag, st), "MPI_Testall");
    while (mode == 2 && left > 0 && ok) {
        ok &= ok_rc(MPI_Waitsome(2 * NOUT, req, &out, idx, st),
                    "MPI_Waitsome");
        left -= out;
    }
    for (int i = 0; i < NOUT; i++) {
        int count = -1;

        ok &= tap_check(rbuf + i * len, len, seed_of(5 + mode, peer, i));
        if (mode < 2) {
            MPI_Get_count(&st[i], MPI_BYTE, &count);
            ok &= count == (int)len;
        }
    }
    return ok;
}

/* Synchronous sends, blocking and not. */
static int test_ssend(void)
{
    const size_t len = (1 << 20) + 3;
    MPI_Request req;
    int ok = 1;

    if (rank == 0) {
        tap_fill(sbuf, len, seed_of(9, 0, 0));
        ok &= ok_rc(MPI_Ssend(sbuf, (int)len, MPI_BYTE, 1, 50,
                              MPI_COMM_WORLD), "MPI_Ssend");
        ok &= ok_rc(MPI_Issend(sbuf, (int)len, MPI_BYTE, 1, 51,
                               MPI_COMM_WORLD, &req), "MPI_Issend");
        ok &= ok_rc(MPI_Wait(&req, MPI_STATUS_IGNORE), "MPI_Wait");
    } else {
        for (int t = 50; t < 52; t++) {
            memset(rbuf, 0, len);
            ok &= ok_rc(MPI_Recv(rbuf, (int)len, MPI_BYTE, 0, t,
                                 MPI_COMM_WORLD, MPI_STATUS_IGNORE), "recv");
            ok &= tap_check(rbuf, len, seed_of(9, 0, 0));
        }
    }
    return ok;
}

/* One persistent receive started three times. */
static int test_persistent(void)
{
    const size_t len = 500000;
    MPI_Request req;
    MPI_Status st;
    int ok = 1, count;

    if (rank == 0) {
        for (int i = 0; i < 3; i++) {
            tap_fill(sbuf, len - (size_t)i, seed_of(10, 0, i));
            ok &= ok_rc(MPI_Send(sbuf, (int)len - i, MPI_BYTE, 1, 60,
                                 MPI_COMM_WORLD), "MPI_Send");
        }
        return ok;
    }
    ok &= ok_rc(MPI_Recv_init(rbuf, (int)len, MPI_BYTE, 0, 60,
                              MPI_COMM_WORLD, &req), "MPI_Recv_init");
    for (int i = 0; i < 3; i++) {
        ok &= ok_rc(MPI_Start(&req), "MPI_Start");
        ok &= ok_rc(MPI_Wait(&req, &st), "MPI_Wait");
        MPI_Get_count(&st, MPI_BYTE, &count);
        ok &= count == (int)len - i &&
              tap_check(rbuf, len - (size_t)i, seed_of(10, 0, i));
    }
    ok &= ok_rc(MPI_Request_free(&req), "MPI_Request_free");
    return ok;
}

/* A receive freed while active still gets its message. */
static int test_free_active(void)
{
    const size_t len = 700001;
    MPI_Request req;
    int ok = 1, done = 0;

    if (rank == 0) {
        tap_fill(sbuf, len, seed_of(11, 0, 0));
        ok &= ok_rc(MPI_Send(sbuf, (int)len, MPI_BYTE, 1, 70,
                             MPI_COMM_WORLD), "MPI_Send");
        /* Sent: the receiver has pulled the data. */
        ok &= ok_rc(MPI_Send(&ok, 1, MPI_INT, 1, 71, MPI_COMM_WORLD),
                    "MPI_Send");
        return ok;
    }
    ok &= ok_rc(MPI_Irecv(rbuf, (int)len, MPI_BYTE, 0, 70, MPI_COMM_WORLD,
                          &req), "MPI_Irecv");
    ok &= ok_rc(MPI_Request_free(&req), "MPI_Request_free");
    ok &= req == MPI_REQUEST_NULL;
    ok &= ok_rc(MPI_Recv(&done, 1, MPI_INT, 0, 71, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE), "MPI_Recv");
    return ok && done && tap_check(rbuf, len, seed_of(11, 0, 0));
}

/* Cancel of a large send: all or nothing.  The receiver posts its
 * receive once the cancel was tried, and learns the outcome after. */
static int test_cancel_send(void)
{
    const size_t len = 300007;
    MPI_Request req;
    MPI_Status st;
    int ok = 1, cancelled = 0, flag = 0;

    if (rank == 0) {
        tap_fill(sbuf, len, seed_of(12, 0, 0));
        ok &= ok_rc(MPI_Isend(sbuf, (int)len, MPI_BYTE, 1, 80,
                              MPI_COMM_WORLD, &req), "MPI_Isend");
        ok &= ok_rc(MPI_Cancel(&req), "MPI_Cancel");
        ok &= ok_rc(MPI_Send(&ok, 1, MPI_INT, 1, 81, MPI_COMM_WORLD),
                    "MPI_Send");
        ok &= ok_rc(MPI_Wait(&req, &st), "MPI_Wait");
        MPI_Test_cancelled(&st, &cancelled);
        ok &= ok_rc(MPI_Send(&cancelled, 1, MPI_INT, 1, 82, MPI_COMM_WORLD),
                    "MPI_Send");
        return ok;
    }
    ok &= ok_rc(MPI_Recv(&flag, 1, MPI_INT, 0, 81, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE), "MPI_Recv");
    memset(rbuf, 0, len);
    ok &= ok_rc(MPI_Irecv(rbuf, (int)len, MPI_BYTE, 0, 80, MPI_COMM_WORLD,
                          &req), "MPI_Irecv");
    ok &= ok_rc(MPI_Recv(&cancelled, 1, MPI_INT, 0, 82, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE), "MPI_Recv");
    if (cancelled) {
        ok &= ok_rc(MPI_Cancel(&req), "MPI_Cancel");
        ok &= ok_rc(MPI_Wait(&req, &st), "MPI_Wait");
        MPI_Test_cancelled(&st, &flag);
        if (!flag)
            tap_diag("the send was cancelled, yet a receive matched it");
        return ok && flag;
    }
    ok &= ok_rc(MPI_Wait(&req, &st), "MPI_Wait");
    return ok && tap_check(rbuf, len, seed_of(12, 0, 0));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    peer = 1 - rank;
    sbuf = malloc(BIG + GUARD);
    rbuf = malloc(BIG + GUARD);
    if (sbuf == NULL || rbuf == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    tap_plan(11);
    tap_ok(test_sizes(), "Send/Recv 1 B .. 64 MiB both ways: data, "
           "count, elements, guard bytes");
    tap_ok(test_order(), "eager and rendezvous on one tag, wildcard "
           "receives: send order, real sizes");
    tap_ok(test_truncate(), "too-small receives: MPI_ERR_TRUNCATE, the "
           "sender succeeds");
    tap_ok(test_vector(), "strided send to contiguous receive and back");
    tap_ok(test_many(0), "64 outstanding each way, MPI_Waitall");
    tap_ok(test_many(1), "64 outstanding each way, MPI_Testall loop");
    tap_ok(test_many(2), "64 outstanding each way, MPI_Waitsome loop");
    tap_ok(test_ssend(), "MPI_Ssend and MPI_Issend of 1 MiB + 3");
    tap_ok(test_persistent(), "persistent receive started three times");
    tap_ok(test_free_active(), "a receive freed while active gets its "
           "message");
    tap_ok(test_cancel_send(), "cancel of a large send: cancelled and "
           "absent, or delivered intact");
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return tap_status();
}
