/* ftw-test: np=4 mode=both timeout=60 */
/*
 * p2p_nonblocking - nonblocking point-to-point and its completion calls are
 * transparent.
 *
 * Each rank posts an MPI_Irecv from and an MPI_Isend to every other rank
 * (sizes 0 .. 1 MiB + 13 varying per pair) and completes them with one of
 * MPI_Wait, an MPI_Test loop, MPI_Waitall, MPI_Waitany, MPI_Waitsome,
 * MPI_Testall, MPI_Testany or MPI_Testsome.  Asserts that every call
 * succeeds, that each request completes exactly once and is reported under
 * its own index, that completed requests become MPI_REQUEST_NULL, that
 * MPI_REQUEST_NULL entries are skipped, that receive statuses name the
 * right source, tag and count, and that the data arrive intact with the
 * bytes after them untouched.  Also asserts: MPI_STATUSES_IGNORE works;
 * the test calls report nothing complete while a receive cannot yet be
 * matched; arrays of only MPI_REQUEST_NULL complete at once with
 * MPI_UNDEFINED; MPI_Request_free on a send (completed, or still in flight)
 * still delivers it; a cancelled unmatched MPI_Irecv reports
 * MPI_Test_cancelled true and does not disturb later traffic.
 */
#include "tap.h"

#define NSIZES 5
#define MAXLEN ((size_t)(1u << 20) + 13)
#define GUARD 64
#define CANARY 0x5A5A0F0Full
#define MAXSLOTS 16

static const size_t sizes[NSIZES] = { 0, 1, 1000, 65536, MAXLEN };

static int rank, nprocs;

static uint64_t seed_of(int test, int src, int dst, int idx)
{
    return ((uint64_t)test << 48) | ((uint64_t)src << 36) |
           ((uint64_t)dst << 24) | (uint64_t)idx;
}

/* ---- a set of requests: one receive from and one send to each peer ---- */

enum kind { K_NULL, K_RECV, K_SEND };

struct slot {
    enum kind kind;
    int peer, tag, done;
    size_t len;
    uint64_t seed;
    unsigned char *buf;
};

struct xset {
    int n, active;
    struct slot s[MAXSLOTS];
    MPI_Request req[MAXSLOTS];
};

static int pair_tag(int test, int src, int dst)
{
    return 1000 + test * 64 + src * 8 + dst;
}

static size_t pair_len(int test, int src, int dst)
{
    return sizes[(test + src + 2 * dst) % NSIZES];
}

static void add_slot(struct xset *x, enum kind k, int peer, int test)
{
    struct slot *s = &x->s[x->n];

    memset(s, 0, sizeof(*s));
    s->kind = k;
    s->peer = peer;
    if (k == K_RECV) {
        s->tag = pair_tag(test, peer, rank);
        s->len = pair_len(test, peer, rank);
        s->seed = seed_of(test, peer, rank, 0);
        s->buf = malloc(s->len + GUARD);
        tap_fill(s->buf, s->len + GUARD, CANARY);
    } else if (k == K_SEND) {
        s->tag = pair_tag(test, rank, peer);
        s->len = pair_len(test, rank, peer);
        s->seed = seed_of(test, rank, peer, 0);
        s->buf = malloc(s->len + 1);
        tap_fill(s->buf, s->len, s->seed);
    }
    x->n++;
}

/* Post all receives, then all sends; with nulls, MPI_REQUEST_NULL entries
 * sit at the start, in the middle and at the end of the array. */
static int xset_post(struct xset *x, int test, int nulls)
{
    int ok = 1;

    x->n = 0;
    x->active = 0;
    if (nulls)
        add_slot(x, K_NULL, -1, test);
    for (int p = 0; p < nprocs; p++)
        if (p != rank)
            add_slot(x, K_RECV, p, test);
    if (nulls)
        add_slot(x, K_NULL, -1, test);
    for (int p = 0; p < nprocs; p++)
        if (p != rank)
            add_slot(x, K_SEND, p, test);
    if (nulls)
        add_slot(x, K_NULL, -1, test);

    for (int i = 0; i < x->n; i++) {
        struct slot *s = &x->s[i];

        x->req[i] = MPI_REQUEST_NULL;
        if (s->kind == K_RECV)
            ok &= mpi_ok(MPI_Irecv(s->buf, (int)(s->len + GUARD), MPI_BYTE,
                                   s->peer, s->tag, MPI_COMM_WORLD, &x->req[i]),
                         "MPI_Irecv");
    }
    for (int i = 0; i < x->n; i++) {
        struct slot *s = &x->s[i];

        if (s->kind == K_SEND)
            ok &= mpi_ok(MPI_Isend(s->buf, (int)s->len, MPI_BYTE, s->peer,
                                   s->tag, MPI_COMM_WORLD, &x->req[i]),
                         "MPI_Isend");
        if (s->kind != K_NULL)
            x->active++;
    }
    return ok;
}

/* Slot i was reported complete with status st (NULL: status ignored). */
static int slot_done(struct xset *x, int i, const MPI_Status *st)
{
    struct slot *s;

    if (i < 0 || i >= x->n) {
        tap_diag("completion index %d out of range", i);
        return 0;
    }
    s = &x->s[i];
    if (s->kind == K_NULL) {
        tap_diag("MPI_REQUEST_NULL entry %d reported complete", i);
        return 0;
    }
    if (s->done) {
        tap_diag("request %d reported complete twice", i);
        return 0;
    }
    s->done = 1;
    if (x->req[i] != MPI_REQUEST_NULL) {
        tap_diag("completed request %d not set to MPI_REQUEST_NULL", i);
        return 0;
    }
    if (s->kind == K_SEND)
        return 1;
    if (st) {
        int count = -1;

        if (!mpi_ok(MPI_Get_count(st, MPI_BYTE, &count), "MPI_Get_count"))
            return 0;
        if (st->MPI_SOURCE != s->peer || st->MPI_TAG != s->tag ||
            count < 0 || (size_t)count != s->len) {
            tap_diag("slot %d: status %d/%d/%d, expected %d/%d/%zu", i,
                     st->MPI_SOURCE, st->MPI_TAG, count, s->peer, s->tag, s->len);
            return 0;
        }
    }
    if (!tap_check(s->buf, s->len, s->seed)) {
        tap_diag("slot %d: payload of %zu bytes from %d corrupted", i, s->len,
                 s->peer);
        return 0;
    }
    for (size_t b = s->len; b < s->len + GUARD; b++) {
        if (s->buf[b] != tap_pattern_byte(CANARY, b)) {
            tap_diag("slot %d: receive buffer overwritten at %zu", i, b);
            return 0;
        }
    }
    return 1;
}

/* Every non-null slot completed; frees the buffers. */
static int xset_finish(struct xset *x)
{
    int ok = 1;

    for (int i = 0; i < x->n; i++) {
        if (x->s[i].kind != K_NULL && !x->s[i].done) {
            tap_diag("request %d never reported complete", i);
            ok = 0;
        }
        if (x->req[i] != MPI_REQUEST_NULL)
            ok = 0;
        free(x->s[i].buf);
    }
    return ok;
}

/* ---- one completion method per check ---- */

static int by_wait(int test)
{
    struct xset x;
    int ok = xset_post(&x, test, 0);

    for (int i = 0; i < x.n; i++) {
        MPI_Status st;

        ok &= mpi_ok(MPI_Wait(&x.req[i], &st), "MPI_Wait");
        ok &= slot_done(&x, i, &st);
    }
    return xset_finish(&x) && ok;
}

static int by_test_loop(int test)
{
    struct xset x;
    int ok = xset_post(&x, test, 0);

    for (int i = 0; i < x.n; i++) {
        MPI_Status st;
        int flag = 0;

        while (!flag && ok)
            ok &= mpi_ok(MPI_Test(&x.req[i], &flag, &st), "MPI_Test");
        ok &= slot_done(&x, i, &st);
    }
    return xset_finish(&x) && ok;
}

static int by_waitall(int test, int nulls, int ignore)
{
    struct xset x;
    MPI_Status st[MAXSLOTS];
    int ok = xset_post(&x, test, nulls);

    ok &= mpi_ok(MPI_Waitall(x.n, x.req, ignore ? MPI_STATUSES_IGNORE : st),
                 "MPI_Waitall");
    for (int i = 0; i < x.n; i++)
        if (x.s[i].kind != K_NULL)
            ok &= slot_done(&x, i, ignore ? NULL : &st[i]);
    return xset_finish(&x) && ok;
}

static int by_testall(int test)
{
    struct xset x;
    MPI_Status st[MAXSLOTS];
    int ok = xset_post(&x, test, 1), flag = 0;

    while (!flag && ok)
        ok &= mpi_ok(MPI_Testall(x.n, x.req, &flag, st), "MPI_Testall");
    for (int i = 0; i < x.n; i++)
        if (x.s[i].kind != K_NULL)
            ok &= slot_done(&x, i, &st[i]);
    return xset_finish(&x) && ok;
}

static int by_waitany(int test)
{
    struct xset x;
    int ok = xset_post(&x, test, 1), completed = 0;

    for (;;) {
        MPI_Status st;
        int idx = -2;

        ok &= mpi_ok(MPI_Waitany(x.n, x.req, &idx, &st), "MPI_Waitany");
        if (!ok || idx == MPI_UNDEFINED)
            break;
        ok &= slot_done(&x, idx, &st);
        if (++completed > x.active)
            break;
    }
    if (completed != x.active) {
        tap_diag("MPI_Waitany completed %d of %d", completed, x.active);
        ok = 0;
    }
    return xset_finish(&x) && ok;
}

static int by_testany(int test)
{
    struct xset x;
    int ok = xset_post(&x, test, 1), completed = 0;

    for (;;) {
        MPI_Status st;
        int idx = -2, flag = 0;

        ok &= mpi_ok(MPI_Testany(x.n, x.req, &idx, &flag, &st), "MPI_Testany");
        if (!ok)
            break;
        if (!flag) {
            if (idx != MPI_UNDEFINED) {
                tap_diag("MPI_Testany flag 0 with index %d", idx);
                ok = 0;
                break;
            }
            continue;
        }
        if (idx == MPI_UNDEFINED)
            break;
        ok &= slot_done(&x, idx, &st);
        if (++completed > x.active)
            break;
    }
    if (completed != x.active) {
        tap_diag("MPI_Testany completed %d of %d", completed, x.active);
        ok = 0;
    }
    return xset_finish(&x) && ok;
}

static int by_some(int test, int use_test)
{
    struct xset x;
    int ok = xset_post(&x, test, 1), completed = 0;

    for (;;) {
        MPI_Status st[MAXSLOTS];
        int idx[MAXSLOTS], outcount = -2;

        if (use_test)
            ok &= mpi_ok(MPI_Testsome(x.n, x.req, &outcount, idx, st),
                         "MPI_Testsome");
        else
            ok &= mpi_ok(MPI_Waitsome(x.n, x.req, &outcount, idx, st),
                         "MPI_Waitsome");
        if (!ok || outcount == MPI_UNDEFINED)
            break;
        if (outcount < 0 || outcount > x.n || (!use_test && outcount == 0)) {
            tap_diag("outcount %d", outcount);
            ok = 0;
            break;
        }
        for (int k = 0; k < outcount; k++)
            ok &= slot_done(&x, idx[k], &st[k]);
        completed += outcount;
        if (completed > x.active)
            break;
    }
    if (completed != x.active) {
        tap_diag("completed %d of %d", completed, x.active);
        ok = 0;
    }
    return xset_finish(&x) && ok;
}

/* ---- no completion while a receive cannot be matched ---- */

/* Each rank's receive from prev cannot match before the barrier, because
 * prev sends only after it.  All test calls must report nothing done. */
static int pending_reports(void)
{
    int next = (rank + 1) % nprocs, prev = (rank + nprocs - 1) % nprocs;
    int ok = 1, flag = -1, idx = -2, outcount = -2, indices[2], count = -1;
    unsigned char in[100], out[100];
    MPI_Request req[2];
    MPI_Status st[2];

    tap_fill(out, sizeof out, seed_of(40, rank, next, 0));
    ok &= mpi_ok(MPI_Irecv(in, sizeof in, MPI_BYTE, prev, 77, MPI_COMM_WORLD,
                           &req[1]), "MPI_Irecv");
    req[0] = MPI_REQUEST_NULL;

    ok &= mpi_ok(MPI_Test(&req[1], &flag, &st[0]), "MPI_Test");
    if (flag != 0) {
        tap_diag("MPI_Test flag %d for an unmatched receive", flag);
        ok = 0;
    }
    flag = -1;
    ok &= mpi_ok(MPI_Testall(2, req, &flag, st), "MPI_Testall");
    if (flag != 0) {
        tap_diag("MPI_Testall flag %d", flag);
        ok = 0;
    }
    flag = -1;
    ok &= mpi_ok(MPI_Testany(2, req, &idx, &flag, &st[0]), "MPI_Testany");
    if (flag != 0 || idx != MPI_UNDEFINED) {
        tap_diag("MPI_Testany flag %d index %d", flag, idx);
        ok = 0;
    }
    ok &= mpi_ok(MPI_Testsome(2, req, &outcount, indices, st), "MPI_Testsome");
    if (outcount != 0) {
        tap_diag("MPI_Testsome outcount %d", outcount);
        ok = 0;
    }
    ok &= mpi_ok(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    ok &= mpi_ok(MPI_Send(out, sizeof out, MPI_BYTE, next, 77, MPI_COMM_WORLD),
                 "MPI_Send");
    ok &= mpi_ok(MPI_Wait(&req[1], &st[1]), "MPI_Wait");
    ok &= mpi_ok(MPI_Get_count(&st[1], MPI_BYTE, &count), "MPI_Get_count");
    ok &= st[1].MPI_SOURCE == prev && st[1].MPI_TAG == 77 &&
          count == (int)sizeof in;
    ok &= tap_check(in, sizeof in, seed_of(40, prev, rank, 0));
    return ok;
}

/* ---- arrays holding only MPI_REQUEST_NULL ---- */

static int null_only(void)
{
    MPI_Request req[3] = { MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL };
    MPI_Status st[3];
    int ok = 1, idx = -2, flag = -1, outcount = -2, indices[3];

    ok &= mpi_ok(MPI_Wait(&req[0], &st[0]), "MPI_Wait(NULL)");
    ok &= tap_status_empty(&st[0]);
    ok &= mpi_ok(MPI_Test(&req[0], &flag, &st[0]), "MPI_Test(NULL)");
    ok &= flag == 1 && tap_status_empty(&st[0]);
    ok &= mpi_ok(MPI_Waitall(3, req, st), "MPI_Waitall(NULL)");
    ok &= mpi_ok(MPI_Waitany(3, req, &idx, &st[0]), "MPI_Waitany(NULL)");
    ok &= idx == MPI_UNDEFINED;
    flag = -1;
    ok &= mpi_ok(MPI_Testall(3, req, &flag, st), "MPI_Testall(NULL)");
    ok &= flag == 1;
    flag = -1;
    idx = -2;
    ok &= mpi_ok(MPI_Testany(3, req, &idx, &flag, &st[0]), "MPI_Testany(NULL)");
    ok &= flag == 1 && idx == MPI_UNDEFINED;
    ok &= mpi_ok(MPI_Waitsome(3, req, &outcount, indices, st),
                 "MPI_Waitsome(NULL)");
    ok &= outcount == MPI_UNDEFINED;
    outcount = -2;
    ok &= mpi_ok(MPI_Testsome(3, req, &outcount, indices, st),
                 "MPI_Testsome(NULL)");
    ok &= outcount == MPI_UNDEFINED;
    return ok;
}

/* ---- MPI_Request_free on sends ---- */

/* Rank r sends to next with MPI_Isend; early: free the request at once,
 * else free it after next has acknowledged receipt (the send is complete
 * but was never waited on).  The data must arrive either way. */
static int request_free(int early)
{
    int next = (rank + 1) % nprocs, prev = (rank + nprocs - 1) % nprocs;
    int ok = 1, count = -1, tag = early ? 90 : 91;
    size_t len = early ? 70001 : 3001;
    unsigned char *out = malloc(len), *in = malloc(len), ack = 0;
    MPI_Request req;
    MPI_Status st;

    tap_fill(out, len, seed_of(50 + early, rank, next, 0));
    ok &= mpi_ok(MPI_Isend(out, (int)len, MPI_BYTE, next, tag, MPI_COMM_WORLD,
                           &req), "MPI_Isend");
    if (early) {
        ok &= mpi_ok(MPI_Request_free(&req), "MPI_Request_free");
        ok &= req == MPI_REQUEST_NULL;
    }
    ok &= mpi_ok(MPI_Recv(in, (int)len, MPI_BYTE, prev, tag, MPI_COMM_WORLD, &st),
                 "MPI_Recv");
    ok &= mpi_ok(MPI_Get_count(&st, MPI_BYTE, &count), "MPI_Get_count");
    ok &= count == (int)len && tap_check(in, len, seed_of(50 + early, prev, rank, 0));
    /* acknowledge to prev; wait for next's acknowledgement */
    ok &= mpi_ok(MPI_Send(&ack, 1, MPI_BYTE, prev, tag + 10, MPI_COMM_WORLD),
                 "MPI_Send(ack)");
    ok &= mpi_ok(MPI_Recv(&ack, 1, MPI_BYTE, next, tag + 10, MPI_COMM_WORLD,
                          MPI_STATUS_IGNORE), "MPI_Recv(ack)");
    if (!early) {
        ok &= mpi_ok(MPI_Request_free(&req), "MPI_Request_free");
        ok &= req == MPI_REQUEST_NULL;
    }
    free(out);
    free(in);
    return ok;
}

/* ---- cancel of an unmatched receive ---- */

static int cancel_irecv(void)
{
    int next = (rank + 1) % nprocs, prev = (rank + nprocs - 1) % nprocs;
    int ok = 1, flag = 0, count = -1;
    unsigned char buf[256], out[256];
    MPI_Request req;
    MPI_Status st;

    tap_fill(buf, sizeof buf, CANARY);
    /* tag 300 is never sent; the same source sends on tag 301 afterwards */
    ok &= mpi_ok(MPI_Irecv(buf, sizeof buf, MPI_BYTE, prev, 300, MPI_COMM_WORLD,
                           &req), "MPI_Irecv");
    ok &= mpi_ok(MPI_Cancel(&req), "MPI_Cancel");
    ok &= mpi_ok(MPI_Wait(&req, &st), "MPI_Wait");
    ok &= mpi_ok(MPI_Test_cancelled(&st, &flag), "MPI_Test_cancelled");
    if (!flag) {
        tap_diag("MPI_Test_cancelled false for an unmatched receive");
        ok = 0;
    }
    ok &= req == MPI_REQUEST_NULL && tap_check(buf, sizeof buf, CANARY);

    /* A cancelled receive on an ANY_SOURCE/ANY_TAG wildcard as well. */
    flag = 0;
    ok &= mpi_ok(MPI_Irecv(buf, sizeof buf, MPI_BYTE, MPI_ANY_SOURCE,
                           MPI_ANY_TAG, MPI_COMM_WORLD, &req), "MPI_Irecv(any)");
    ok &= mpi_ok(MPI_Cancel(&req), "MPI_Cancel(any)");
    ok &= mpi_ok(MPI_Wait(&req, &st), "MPI_Wait(any)");
    ok &= mpi_ok(MPI_Test_cancelled(&st, &flag), "MPI_Test_cancelled(any)");
    ok &= flag && tap_check(buf, sizeof buf, CANARY);

    /* Later traffic is unaffected. */
    ok &= mpi_ok(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    tap_fill(out, sizeof out, seed_of(60, rank, next, 0));
    ok &= mpi_ok(MPI_Sendrecv(out, sizeof out, MPI_BYTE, next, 301, buf,
                              sizeof buf, MPI_BYTE, prev, 301, MPI_COMM_WORLD,
                              &st), "MPI_Sendrecv");
    ok &= mpi_ok(MPI_Get_count(&st, MPI_BYTE, &count), "MPI_Get_count");
    ok &= count == (int)sizeof buf && st.MPI_SOURCE == prev &&
          tap_check(buf, sizeof buf, seed_of(60, prev, rank, 0));
    return ok;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (nprocs < 2 || 2 * nprocs + 1 > MAXSLOTS)
        MPI_Abort(MPI_COMM_WORLD, 2);

    tap_plan(18);
    tap_ok(by_wait(1), "Isend/Irecv completed one by one with MPI_Wait");
    tap_ok(by_wait(2), "Isend/Irecv with MPI_Wait, second size pattern");
    tap_ok(by_test_loop(3), "Isend/Irecv completed by MPI_Test loops");
    tap_ok(by_waitall(4, 0, 0), "MPI_Waitall with statuses");
    tap_ok(by_waitall(5, 1, 0),
           "MPI_Waitall with statuses and MPI_REQUEST_NULL entries");
    tap_ok(by_waitall(6, 1, 1),
           "MPI_Waitall with MPI_STATUSES_IGNORE and MPI_REQUEST_NULL entries");
    tap_ok(by_waitany(7), "MPI_Waitany loop: each index once, statuses, data");
    tap_ok(by_waitany(8), "MPI_Waitany loop, second size pattern");
    tap_ok(by_some(9, 0), "MPI_Waitsome loop: indices, outcounts, statuses, data");
    tap_ok(by_testall(10), "MPI_Testall loop: statuses and data");
    tap_ok(by_testany(11), "MPI_Testany loop: each index once, statuses, data");
    tap_ok(by_some(12, 1), "MPI_Testsome loop: indices, outcounts, statuses, data");
    tap_ok(by_some(13, 1), "MPI_Testsome loop, second size pattern");
    tap_ok(pending_reports(),
           "Test/Testall/Testany/Testsome report no completion for an unmatched receive");
    tap_ok(null_only(), "arrays of only MPI_REQUEST_NULL complete at once");
    tap_ok(request_free(0), "MPI_Request_free on a completed Isend");
    tap_ok(request_free(1), "MPI_Request_free on an in-flight Isend still delivers");
    tap_ok(cancel_irecv(),
           "cancelled unmatched Irecv: MPI_Test_cancelled true, later traffic intact");

    MPI_Finalize();
    return tap_status();
}
