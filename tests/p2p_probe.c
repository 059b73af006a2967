/* ftw-test: np=4 mode=both timeout=60 */
/*
 * p2p_probe - probing and matched receives are transparent.
 *
 * Each rank in turn receives one message from every other rank (sizes
 * 0 .. 1 MiB + 13 varying per sender) after discovering it with MPI_Probe,
 * an MPI_Iprobe loop, MPI_Mprobe or an MPI_Improbe loop, using
 * MPI_ANY_SOURCE/MPI_ANY_TAG.  Asserts that the probe status names a real
 * pending message (source, tag, MPI_Get_count), that a buffer of exactly
 * that size receives it intact with a matching status, that a probe does
 * not consume the message, that MPI_Iprobe/MPI_Improbe report nothing for a
 * message not yet sent, and that a message matched by MPI_Mprobe is no
 * longer visible to ordinary receives (a later message with the same
 * envelope is received first by MPI_Recv).  Asserts MPI_PROC_NULL
 * semantics: sends and receives complete at once, receives and probes give
 * source MPI_PROC_NULL, tag MPI_ANY_TAG and count 0 and leave the buffer
 * untouched (for nonblocking receives only the count is asserted), and
 * MPI_Mprobe/MPI_Improbe return MPI_MESSAGE_NO_PROC.
 */
#include "tap.h"

#define NSIZES 5
#define MAXLEN ((size_t)(1u << 20) + 13)
#define CANARY 0x9B0BEull

static const size_t sizes[NSIZES] = { 0, 1, 1000, 65536, MAXLEN };

static int rank, nprocs;

static uint64_t seed_of(int test, int src, int dst, int idx)
{
    return ((uint64_t)test << 48) | ((uint64_t)src << 36) |
           ((uint64_t)dst << 24) | (uint64_t)idx;
}

static int pair_tag(int test, int src, int dst)
{
    return 500 + test * 64 + src * 8 + dst;
}

static size_t pair_len(int test, int src, int dst)
{
    return sizes[(test + src + 2 * dst) % NSIZES];
}

enum method { M_PROBE, M_IPROBE, M_MPROBE, M_IMPROBE };

/* Discover one pending message from any source with the given method,
 * receive it into a buffer sized from the probe status, and verify it. */
static int probe_and_receive(enum method m, int test, int *seen)
{
    MPI_Status pst, rst;
    MPI_Message msg = MPI_MESSAGE_NULL;
    MPI_Request req;
    int ok = 1, flag = 0, count = -1, rcount = -1;

    switch (m) {
    case M_PROBE:
        ok &= mpi_ok(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &pst),
                     "MPI_Probe");
        break;
    case M_IPROBE:
        while (!flag && ok)
            ok &= mpi_ok(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD,
                                    &flag, &pst), "MPI_Iprobe");
        break;
    case M_MPROBE:
        ok &= mpi_ok(MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD,
                                &msg, &pst), "MPI_Mprobe");
        break;
    case M_IMPROBE:
        while (!flag && ok)
            ok &= mpi_ok(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD,
                                     &flag, &msg, &pst), "MPI_Improbe");
        break;
    }
    if (!ok)
        return 0;
    ok &= mpi_ok(MPI_Get_count(&pst, MPI_BYTE, &count), "MPI_Get_count(probe)");

    int s = pst.MPI_SOURCE;
    if (s < 0 || s >= nprocs || s == rank || seen[s] || count < 0) {
        tap_diag("probe reported source %d count %d", s, count);
        return 0;
    }
    seen[s] = 1;
    if (pst.MPI_TAG != pair_tag(test, s, rank) ||
        (size_t)count != pair_len(test, s, rank)) {
        tap_diag("probe status tag %d count %d, expected %d/%zu", pst.MPI_TAG,
                 count, pair_tag(test, s, rank), pair_len(test, s, rank));
        ok = 0;
    }

    /* Probing must not consume: the same message is still the first match. */
    if (m == M_PROBE || m == M_IPROBE) {
        MPI_Status again;
        int f2 = 0;

        while (!f2 && ok)
            ok &= mpi_ok(MPI_Iprobe(s, pst.MPI_TAG, MPI_COMM_WORLD, &f2, &again),
                         "MPI_Iprobe(again)");
        ok &= again.MPI_SOURCE == s && again.MPI_TAG == pst.MPI_TAG;
    }

    /* Exactly count bytes, plus one canary byte the receive must not touch. */
    unsigned char *buf = malloc((size_t)count + 1);
    tap_fill(buf, (size_t)count + 1, CANARY);
    switch (m) {
    case M_PROBE:
    case M_IPROBE:
        ok &= mpi_ok(MPI_Recv(buf, count, MPI_BYTE, s, pst.MPI_TAG,
                              MPI_COMM_WORLD, &rst), "MPI_Recv");
        break;
    case M_MPROBE:
        ok &= mpi_ok(MPI_Mrecv(buf, count, MPI_BYTE, &msg, &rst), "MPI_Mrecv");
        ok &= msg == MPI_MESSAGE_NULL;
        break;
    case M_IMPROBE:
        ok &= mpi_ok(MPI_Imrecv(buf, count, MPI_BYTE, &msg, &req), "MPI_Imrecv");
        ok &= msg == MPI_MESSAGE_NULL;
        ok &= mpi_ok(MPI_Wait(&req, &rst), "MPI_Wait");
        break;
    }
    ok &= mpi_ok(MPI_Get_count(&rst, MPI_BYTE, &rcount), "MPI_Get_count");
    if (rst.MPI_SOURCE != s || rst.MPI_TAG != pst.MPI_TAG || rcount != count) {
        tap_diag("receive status %d/%d/%d, probe said %d/%d/%d", rst.MPI_SOURCE,
                 rst.MPI_TAG, rcount, s, pst.MPI_TAG, count);
        ok = 0;
    }
    if (!tap_check(buf, (size_t)count, seed_of(test, s, rank, 0))) {
        tap_diag("payload of %d bytes from %d corrupted", count, s);
        ok = 0;
    }
    if (buf[count] != tap_pattern_byte(CANARY, (size_t)count)) {
        tap_diag("byte after the message overwritten");
        ok = 0;
    }
    free(buf);
    return ok;
}

/* Every rank in turn receives one message from each other rank. */
static int gather_with(enum method m, int test)
{
    int ok = 1;

    for (int root = 0; root < nprocs; root++) {
        if (rank != root) {
            size_t len = pair_len(test, rank, root);
            unsigned char *out = malloc(len + 1);

            tap_fill(out, len, seed_of(test, rank, root, 0));
            ok &= mpi_ok(MPI_Send(out, (int)len, MPI_BYTE, root,
                                  pair_tag(test, rank, root), MPI_COMM_WORLD),
                         "MPI_Send");
            free(out);
            continue;
        }
        int seen[64] = { 0 };
        for (int n = 0; n < nprocs - 1; n++)
            ok &= probe_and_receive(m, test, seen);
    }
    return ok;
}

/* The message from prev is sent only after a barrier this rank has not yet
 * entered, so the nonblocking probes must report nothing. */
static int nothing_pending(void)
{
    int next = (rank + 1) % nprocs, prev = (rank + nprocs - 1) % nprocs;
    int ok = 1, flag = -1, count = -1;
    unsigned char out[33], in[33];
    MPI_Message msg = MPI_MESSAGE_NULL;
    MPI_Status st;

    ok &= mpi_ok(MPI_Iprobe(prev, 88, MPI_COMM_WORLD, &flag, &st), "MPI_Iprobe");
    ok &= flag == 0;
    flag = -1;
    ok &= mpi_ok(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag,
                             &msg, &st), "MPI_Improbe");
    ok &= flag == 0;

    ok &= mpi_ok(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    tap_fill(out, sizeof out, seed_of(70, rank, next, 0));
    ok &= mpi_ok(MPI_Sendrecv(out, sizeof out, MPI_BYTE, next, 88, in, sizeof in,
                              MPI_BYTE, prev, 88, MPI_COMM_WORLD, &st),
                 "MPI_Sendrecv");
    ok &= mpi_ok(MPI_Get_count(&st, MPI_BYTE, &count), "MPI_Get_count");
    ok &= count == (int)sizeof in && tap_check(in, sizeof in, seed_of(70, prev, rank, 0));
    return ok;
}

/* prev sends two messages with one envelope (A then B).  This rank
 * mprobes A, then MPI_Recv must get B, then MPI_Mrecv gets A. */
static int mprobe_removes_from_matching(void)
{
    int next = (rank + 1) % nprocs, prev = (rank + nprocs - 1) % nprocs;
    int ok = 1, ca = -1, cb = -1;
    unsigned char a_out[100], b_out[200], a_in[200], b_in[200];
    MPI_Request sreq[2];
    MPI_Message msg;
    MPI_Status st, sa, sb, ssts[2];

    tap_fill(a_out, sizeof a_out, seed_of(71, rank, next, 0));
    tap_fill(b_out, sizeof b_out, seed_of(71, rank, next, 1));
    ok &= mpi_ok(MPI_Isend(a_out, sizeof a_out, MPI_BYTE, next, 99,
                           MPI_COMM_WORLD, &sreq[0]), "MPI_Isend(A)");
    ok &= mpi_ok(MPI_Isend(b_out, sizeof b_out, MPI_BYTE, next, 99,
                           MPI_COMM_WORLD, &sreq[1]), "MPI_Isend(B)");

    ok &= mpi_ok(MPI_Mprobe(prev, 99, MPI_COMM_WORLD, &msg, &st), "MPI_Mprobe");
    ok &= mpi_ok(MPI_Recv(b_in, sizeof b_in, MPI_BYTE, prev, 99, MPI_COMM_WORLD,
                          &sb), "MPI_Recv");
    ok &= mpi_ok(MPI_Mrecv(a_in, sizeof a_in, MPI_BYTE, &msg, &sa), "MPI_Mrecv");
    ok &= mpi_ok(MPI_Waitall(2, sreq, ssts), "MPI_Waitall");
    ok &= mpi_ok(MPI_Get_count(&sa, MPI_BYTE, &ca), "MPI_Get_count(A)");
    ok &= mpi_ok(MPI_Get_count(&sb, MPI_BYTE, &cb), "MPI_Get_count(B)");
    if (ca != (int)sizeof a_out || cb != (int)sizeof b_out ||
        !tap_check(a_in, sizeof a_out, seed_of(71, prev, rank, 0)) ||
        !tap_check(b_in, sizeof b_out, seed_of(71, prev, rank, 1))) {
        tap_diag("mprobed message visible to MPI_Recv (counts %d/%d)", ca, cb);
        ok = 0;
    }
    return ok;
}

static int proc_null_status(const MPI_Status *st)
{
    int count = -1;

    if (MPI_Get_count(st, MPI_BYTE, &count) != MPI_SUCCESS)
        return 0;
    if (st->MPI_SOURCE != MPI_PROC_NULL || st->MPI_TAG != MPI_ANY_TAG ||
        count != 0) {
        tap_diag("MPI_PROC_NULL status %d/%d/%d", st->MPI_SOURCE, st->MPI_TAG,
                 count);
        return 0;
    }
    return 1;
}

static int proc_null_sendrecv(void)
{
    unsigned char buf[64], out[64];
    MPI_Request req[2];
    MPI_Status st, sts[2];
    int ok = 1, count = -1;

    tap_fill(buf, sizeof buf, CANARY);
    tap_fill(out, sizeof out, 1);
    ok &= mpi_ok(MPI_Send(out, sizeof out, MPI_BYTE, MPI_PROC_NULL, 5,
                          MPI_COMM_WORLD), "MPI_Send(PROC_NULL)");
    ok &= mpi_ok(MPI_Ssend(out, sizeof out, MPI_BYTE, MPI_PROC_NULL, 5,
                           MPI_COMM_WORLD), "MPI_Ssend(PROC_NULL)");
    ok &= mpi_ok(MPI_Recv(buf, sizeof buf, MPI_BYTE, MPI_PROC_NULL, 5,
                          MPI_COMM_WORLD, &st), "MPI_Recv(PROC_NULL)");
    ok &= proc_null_status(&st);

    ok &= mpi_ok(MPI_Irecv(buf, sizeof buf, MPI_BYTE, MPI_PROC_NULL, 6,
                           MPI_COMM_WORLD, &req[0]), "MPI_Irecv(PROC_NULL)");
    ok &= mpi_ok(MPI_Isend(out, sizeof out, MPI_BYTE, MPI_PROC_NULL, 6,
                           MPI_COMM_WORLD, &req[1]), "MPI_Isend(PROC_NULL)");
    ok &= mpi_ok(MPI_Waitall(2, req, sts), "MPI_Waitall(PROC_NULL)");
    /* Only the count: MPICH 4.0.2 itself reports source and tag 0 (not
     * MPI_PROC_NULL/MPI_ANY_TAG) for a nonblocking MPI_PROC_NULL receive. */
    ok &= mpi_ok(MPI_Get_count(&sts[0], MPI_BYTE, &count), "MPI_Get_count");
    ok &= count == 0;
    ok &= req[0] == MPI_REQUEST_NULL && req[1] == MPI_REQUEST_NULL;

    ok &= tap_check(buf, sizeof buf, CANARY);
    return ok;
}

static int proc_null_probes(void)
{
    unsigned char buf[64];
    MPI_Message msg = MPI_MESSAGE_NULL;
    MPI_Request req;
    MPI_Status st;
    int ok = 1, flag = 0;

    tap_fill(buf, sizeof buf, CANARY);
    ok &= mpi_ok(MPI_Probe(MPI_PROC_NULL, 7, MPI_COMM_WORLD, &st),
                 "MPI_Probe(PROC_NULL)");
    ok &= proc_null_status(&st);
    ok &= mpi_ok(MPI_Iprobe(MPI_PROC_NULL, 7, MPI_COMM_WORLD, &flag, &st),
                 "MPI_Iprobe(PROC_NULL)");
    ok &= flag == 1 && proc_null_status(&st);

    ok &= mpi_ok(MPI_Mprobe(MPI_PROC_NULL, 7, MPI_COMM_WORLD, &msg, &st),
                 "MPI_Mprobe(PROC_NULL)");
    ok &= msg == MPI_MESSAGE_NO_PROC && proc_null_status(&st);
    ok &= mpi_ok(MPI_Mrecv(buf, sizeof buf, MPI_BYTE, &msg, &st),
                 "MPI_Mrecv(NO_PROC)");
    ok &= msg == MPI_MESSAGE_NULL && proc_null_status(&st);

    flag = 0;
    ok &= mpi_ok(MPI_Improbe(MPI_PROC_NULL, 7, MPI_COMM_WORLD, &flag, &msg, &st),
                 "MPI_Improbe(PROC_NULL)");
    ok &= flag == 1 && msg == MPI_MESSAGE_NO_PROC && proc_null_status(&st);
    ok &= mpi_ok(MPI_Imrecv(buf, sizeof buf, MPI_BYTE, &msg, &req),
                 "MPI_Imrecv(NO_PROC)");
    ok &= mpi_ok(MPI_Wait(&req, &st), "MPI_Wait");
    ok &= msg == MPI_MESSAGE_NULL && proc_null_status(&st);

    ok &= tap_check(buf, sizeof buf, CANARY);
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

    tap_plan(10);
    tap_ok(gather_with(M_PROBE, 1),
           "MPI_Probe(ANY_SOURCE, ANY_TAG) then MPI_Recv sized by MPI_Get_count");
    tap_ok(gather_with(M_IPROBE, 2),
           "MPI_Iprobe loop then MPI_Recv sized by MPI_Get_count");
    tap_ok(gather_with(M_MPROBE, 3), "MPI_Mprobe then MPI_Mrecv sized by MPI_Get_count");
    tap_ok(gather_with(M_IMPROBE, 4),
           "MPI_Improbe loop then MPI_Imrecv sized by MPI_Get_count");
    tap_ok(gather_with(M_PROBE, 5), "MPI_Probe, second size pattern");
    tap_ok(gather_with(M_MPROBE, 6), "MPI_Mprobe, second size pattern");
    tap_ok(nothing_pending(), "MPI_Iprobe/MPI_Improbe report no message before it is sent");
    tap_ok(mprobe_removes_from_matching(),
           "a message matched by MPI_Mprobe is not received by a later MPI_Recv");
    tap_ok(proc_null_sendrecv(),
           "send/recv/isend/irecv with MPI_PROC_NULL complete at once with count 0");
    tap_ok(proc_null_probes(),
           "probe/iprobe/mprobe/improbe on MPI_PROC_NULL: PROC_NULL status, MPI_MESSAGE_NO_PROC");

    MPI_Finalize();
    return tap_status();
}
