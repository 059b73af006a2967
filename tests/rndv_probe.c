/* ftw-test: np=2 mode=both timeout=120 env=FTW_RNDV_THRESHOLD=64k env=FTW_XPORT=cma */
/*
 * rndv_probe - probes report the real size of rendezvous messages, and
 * messages a probe has seen keep MPI's order (natively: the same).
 *
 * Rank 0 sends with MPI_Isend, rank 1 probes and receives; every payload
 * is checked byte for byte against its pattern.  Asserts:
 *  - MPI_Probe / MPI_Iprobe loop, then MPI_Recv into a buffer of exactly
 *    the probed size: sizes 20 B, 48 B (the RTS's size), 64 KiB, 1 MiB+7,
 *    3 MiB; probe and receive statuses agree on source, tag and count;
 *  - MPI_Mprobe + MPI_Mrecv and MPI_Improbe + MPI_Imrecv + MPI_Wait, the
 *    same sizes;
 *  - MPI_Probe, then a persistent receive (MPI_Recv_init, MPI_Start,
 *    MPI_Wait), an MPI_Sendrecv or an MPI_Sendrecv_replace: the same;
 *  - order: after a wildcard probe saw a 1 MiB message, four wildcard
 *    MPI_Irecv get it and the three sent after it in send order;
 *  - per tag: probes for tag 8 then tag 5 (both rendezvous), then
 *    receives by tag get the right messages (tag 5 twice in order);
 *  - a probed 1 MiB message received into 100 bytes gives
 *    MPI_ERR_TRUNCATE and its sender's wait succeeds.
 */
#include "tap.h"

#include <stdlib.h>
#include <string.h>

#define NSZ 5
static const size_t sizes[NSZ] = {20, 48, 65536, (1u << 20) + 7, 3u << 20};
static int rank;

static uint64_t seed_of(int test, int i)
{
    return ((uint64_t)test << 32) | (uint64_t)i;
}

/* Rank 0: send n messages (len[i], tag[i]) at once, wait for all. */
static int send_all(int test, int n, const size_t len[], const int tag[])
{
    MPI_Request req[8];
    MPI_Status st[8];
    unsigned char *buf[8];
    int ok = 1;

    for (int i = 0; i < n; i++) {
        buf[i] = malloc(len[i]);
        tap_fill(buf[i], len[i], seed_of(test, i));
        MPI_Isend(buf[i], (int)len[i], MPI_BYTE, 1, tag[i], MPI_COMM_WORLD,
                  &req[i]);
    }
    if (MPI_Waitall(n, req, st) != MPI_SUCCESS) {
        tap_diag("sender's MPI_Waitall failed");
        ok = 0;
    }
    for (int i = 0; i < n; i++)
        free(buf[i]);
    return ok;
}

/* Rank 1: a message described by st arrived in buf: check it is message
 * i of test, of len bytes with tag tag. */
static int check_msg(const MPI_Status *st, const void *buf, int test, int i,
                     size_t len, int tag)
{
    int count = -1;

    MPI_Get_count(st, MPI_BYTE, &count);
    if (st->MPI_SOURCE != 0 || st->MPI_TAG != tag || count != (int)len ||
        !tap_check(buf, len, seed_of(test, i))) {
        tap_diag("test %d msg %d: source %d tag %d count %d, expected "
                 "0/%d/%zu or bad data", test, i, st->MPI_SOURCE, st->MPI_TAG,
                 count, tag, len);
        return 0;
    }
    return 1;
}

/* method 0: Probe, 1: Iprobe loop, 2: Mprobe, 3: Improbe loop; then the
 * matching receive.  4, 5, 6: Probe, then a persistent receive, an
 * MPI_Sendrecv, an MPI_Sendrecv_replace (each sending to MPI_PROC_NULL). */
static int probe_recv(int method)
{
    int tag[NSZ], ok = 1;

    for (int i = 0; i < NSZ; i++)
        tag[i] = 10 + i;
    if (rank == 0)
        return send_all(method, NSZ, sizes, tag);
    for (int i = 0; i < NSZ; i++) {
        MPI_Status pst, rst;
        MPI_Message msg = MPI_MESSAGE_NULL;
        MPI_Request req;
        int flag = 0, count = -1;
        unsigned char *buf;

        if (method == 0 || method >= 4)
            MPI_Probe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &pst);
        while (method == 1 && !flag)
            MPI_Iprobe(MPI_ANY_SOURCE, tag[i], MPI_COMM_WORLD, &flag, &pst);
        if (method == 2)
            MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &msg, &pst);
        while (method == 3 && !flag)
            MPI_Improbe(0, tag[i], MPI_COMM_WORLD, &flag, &msg, &pst);
        MPI_Get_count(&pst, MPI_BYTE, &count);
        if (count != (int)sizes[i] || pst.MPI_TAG != tag[i]) {
            tap_diag("method %d: probe says count %d tag %d, expected %zu/%d",
                     method, count, pst.MPI_TAG, sizes[i], tag[i]);
            ok = 0;
            count = (int)sizes[i];
        }
        buf = malloc((size_t)count);
        if (method < 2) {
            MPI_Recv(buf, count, MPI_BYTE, pst.MPI_SOURCE, pst.MPI_TAG,
                     MPI_COMM_WORLD, &rst);
        } else if (method == 2) {
            MPI_Mrecv(buf, count, MPI_BYTE, &msg, &rst);
        } else if (method == 3) {
            if (MPI_Imrecv(buf, count, MPI_BYTE, &msg, &req) == MPI_SUCCESS)
                MPI_Wait(&req, &rst);
        } else if (method == 4) {
            if (MPI_Recv_init(buf, count, MPI_BYTE, 0, pst.MPI_TAG,
                              MPI_COMM_WORLD, &req) == MPI_SUCCESS &&
                MPI_Start(&req) == MPI_SUCCESS)
                MPI_Wait(&req, &rst);
            MPI_Request_free(&req);
        } else if (method == 5) {
            MPI_Sendrecv(&ok, 1, MPI_INT, MPI_PROC_NULL, 0, buf, count,
                         MPI_BYTE, 0, pst.MPI_TAG, MPI_COMM_WORLD, &rst);
        } else {
            MPI_Sendrecv_replace(buf, count, MPI_BYTE, MPI_PROC_NULL, 0, 0,
                                 pst.MPI_TAG, MPI_COMM_WORLD, &rst);
        }
        ok &= check_msg(&rst, buf, method, i, sizes[i], tag[i]);
        free(buf);
    }
    return ok;
}

/* A wildcard probe sees a rendezvous message; wildcard receives then get
 * it and the later ones in send order. */
static int wildcard_order(void)
{
    static const size_t len[4] = {1u << 20, 20, 300000, 56};
    static const int tag[4] = {5, 6, 5, 7};
    MPI_Request req[4];
    MPI_Status st[4], pst;
    unsigned char *buf[4];
    int ok = 1, flag = 0, count = -1;

    if (rank == 0)
        return send_all(4, 4, len, tag);
    MPI_Probe(MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, &pst);
    MPI_Iprobe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &pst);
    MPI_Get_count(&pst, MPI_BYTE, &count);
    if (!flag || count != (int)len[0] || pst.MPI_TAG != 5) {
        tap_diag("second probe: flag %d count %d tag %d", flag, count,
                 pst.MPI_TAG);
        ok = 0;
    }
    for (int i = 0; i < 4; i++) {
        buf[i] = malloc(len[0]);
        MPI_Irecv(buf[i], (int)len[0], MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG,
                  MPI_COMM_WORLD, &req[i]);
    }
    ok &= MPI_Waitall(4, req, st) == MPI_SUCCESS;
    for (int i = 0; i < 4; i++) {
        ok &= check_msg(&st[i], buf[i], 4, i, len[i], tag[i]);
        free(buf[i]);
    }
    return ok;
}

/* Two probed messages of different tags are taken by tag. */
static int per_tag(void)
{
    static const size_t len[3] = {500000, 400000, 10};
    static const int tag[3] = {5, 8, 5};
    static const int order[3] = {1, 0, 2};   /* receive order: by tag */
    MPI_Status pst, st;
    unsigned char *buf = malloc(len[0]);
    int ok = 1, count = -1;

    if (rank == 0) {
        free(buf);
        return send_all(5, 3, len, tag);
    }
    MPI_Probe(0, 8, MPI_COMM_WORLD, &pst);
    MPI_Get_count(&pst, MPI_BYTE, &count);
    ok &= count == (int)len[1];
    MPI_Probe(0, 5, MPI_COMM_WORLD, &pst);
    MPI_Get_count(&pst, MPI_BYTE, &count);
    ok &= count == (int)len[0];
    if (!ok)
        tap_diag("per-tag probes gave wrong sizes");
    for (int k = 0; k < 3; k++) {
        int i = order[k];

        MPI_Recv(buf, (int)len[0], MPI_BYTE, 0, tag[i], MPI_COMM_WORLD, &st);
        ok &= check_msg(&st, buf, 5, i, len[i], tag[i]);
    }
    free(buf);
    return ok;
}

/* A probed rendezvous message into too small a buffer. */
static int truncated(void)
{
    static const size_t len[1] = {1u << 20};
    static const int tag[1] = {9};
    unsigned char *small = malloc(len[0]);  /* Open MPI's own single-copy
                                              * may write past count */
    MPI_Status pst, st;
    int rc, eclass = -1, count = -1;

    if (rank == 0) {
        free(small);
        return send_all(6, 1, len, tag);
    }
    MPI_Probe(0, 9, MPI_COMM_WORLD, &pst);
    MPI_Get_count(&pst, MPI_BYTE, &count);
    rc = MPI_Recv(small, 100, MPI_BYTE, 0, 9, MPI_COMM_WORLD,
                  &st);
    MPI_Error_class(rc, &eclass);
    free(small);
    if (count != (int)len[0] || eclass != MPI_ERR_TRUNCATE) {
        tap_diag("probe count %d, receive class %d", count, eclass);
        return 0;
    }
    return 1;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    tap_plan(11);
    tap_ok(probe_recv(0), "MPI_Probe then MPI_Recv of the probed size");
    tap_ok(probe_recv(1), "MPI_Iprobe loop then MPI_Recv");
    tap_ok(probe_recv(2), "MPI_Mprobe then MPI_Mrecv");
    tap_ok(probe_recv(3), "MPI_Improbe loop then MPI_Imrecv");
    tap_ok(probe_recv(4), "MPI_Probe then a persistent receive");
    tap_ok(probe_recv(5), "MPI_Probe then MPI_Sendrecv");
    tap_ok(probe_recv(6), "MPI_Probe then MPI_Sendrecv_replace");
    tap_ok(wildcard_order(), "a probed message and later ones: wildcard "
           "receives in send order");
    tap_ok(per_tag(), "probed messages of two tags received by tag");
    tap_ok(truncated(), "a probed 1 MiB message into 100 bytes: "
           "MPI_ERR_TRUNCATE, the sender succeeds");
    tap_ok(MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS, "barrier after all");
    MPI_Finalize();
    return tap_status();
}
