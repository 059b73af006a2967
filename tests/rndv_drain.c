/* ftw-test: np=2 mode=ftwrap timeout=60 link=ftwrap env=FTW_RNDV_THRESHOLD=64k */
/*
 * rndv_drain - rendezvous messages and FTW_Comm_drain_all, no failure.
 *
 * Rank 0 sends a 1 MiB message (rendezvous: its request waits for the
 * receiver's FIN); rank 1 probes it, which takes its RTS into ftwrap's
 * probe stash, and does not receive it.  Both then call
 * FTW_Comm_drain_all(MPI_COMM_WORLD).  Asserts:
 *  - the drain succeeds on both ranks, and rank 0's send request then
 *    completes (MPI_SUCCESS or FTW_ERR_DRAINED), never hangs;
 *  - after the drain, a probe on rank 1 no longer sees the message sent
 *    before it (nothing sent before a drain is matched after it);
 *  - a second 1 MiB message with the same tag, sent after the drain, is
 *    the one rank 1 receives, intact (checksum) and with its real size;
 *  - a probe then a persistent receive of a third message works after
 *    the drain.
 */
#include "tap.h"

#include <stdlib.h>
#include <string.h>

#include "ftwrap.h"

#define LEN ((1u << 20) + 5)
#define TAG 3

static int rank;

int main(int argc, char **argv)
{
    unsigned char *buf;
    MPI_Request req;
    MPI_Status st;
    int rc, flag = 0, count = -1, ok;

    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    buf = malloc(LEN);
    if (buf == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    tap_plan(5);

    /* Before the drain: sent, probed, not received. */
    if (rank == 0) {
        tap_fill(buf, LEN, 1);
        MPI_Isend(buf, LEN, MPI_BYTE, 1, TAG, MPI_COMM_WORLD, &req);
    } else {
        rc = MPI_Probe(0, TAG, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_BYTE, &count);
        if (rc != MPI_SUCCESS || count != (int)LEN)
            tap_diag("probe before the drain: rc %d count %d", rc, count);
    }
    rc = FTW_Comm_drain_all(MPI_COMM_WORLD);
    tap_ok(rc == MPI_SUCCESS, "FTW_Comm_drain_all succeeds (class %d)",
           class_of(rc));

    if (rank == 0) {
        MPI_Request two[2];
        MPI_Status sts[2];
        unsigned char *buf2 = malloc(LEN);

        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        tap_ok(rc == MPI_SUCCESS || class_of(rc) == FTW_ERR_DRAINED,
               "the send from before the drain completes (class %d)",
               class_of(rc));
        if (buf2 == NULL)
            MPI_Abort(MPI_COMM_WORLD, 2);
        tap_fill(buf, LEN, 2);
        tap_fill(buf2, LEN, 3);
        MPI_Isend(buf, LEN, MPI_BYTE, 1, TAG, MPI_COMM_WORLD, &two[0]);
        MPI_Isend(buf2, LEN, MPI_BYTE, 1, TAG, MPI_COMM_WORLD, &two[1]);
        tap_ok(1, "the message received after the drain is the one sent "
               "after it");
        tap_ok(1, "probe then persistent receive after the drain");
        ok = MPI_Waitall(2, two, sts) == MPI_SUCCESS;
        free(buf2);
        tap_ok(ok, "no message from before the drain is left to match; "
               "the sends after it complete");
    } else {
        tap_ok(1, "the send from before the drain completes");
        /* The second message comes after the drain; the first must not
         * be seen first. */
        memset(buf, 0, LEN);
        rc = MPI_Recv(buf, LEN, MPI_BYTE, 0, TAG, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_BYTE, &count);
        ok = rc == MPI_SUCCESS && count == (int)LEN && tap_check(buf, LEN, 2);
        if (!ok)
            tap_diag("after the drain: rc %d, count %d", rc, count);
        tap_ok(ok, "the message received after the drain is the one sent "
               "after it");
        rc = MPI_Probe(0, TAG, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_BYTE, &count);
        ok = rc == MPI_SUCCESS && count == (int)LEN;
        memset(buf, 0, LEN);
        rc = MPI_Recv_init(buf, LEN, MPI_BYTE, 0, TAG, MPI_COMM_WORLD, &req);
        if (rc == MPI_SUCCESS)
            rc = MPI_Start(&req);
        if (rc == MPI_SUCCESS)
            rc = MPI_Wait(&req, &st);
        MPI_Get_count(&st, MPI_BYTE, &count);
        ok &= rc == MPI_SUCCESS && count == (int)LEN && tap_check(buf, LEN, 3);
        MPI_Request_free(&req);
        tap_ok(ok, "probe then persistent receive after the drain");
        flag = 0;
        MPI_Iprobe(0, TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        tap_ok(!flag, "no message from before the drain is left to match; "
               "the sends after it complete");
    }
    free(buf);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return tap_status();
}
