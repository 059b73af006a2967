/* ftw-test: np=2 mode=ftwrap timeout=60 link=ftwrap env=FTW_RNDV_THRESHOLD=64k */
/*
 * rndv_persistent_cut - persistent rendezvous sends cut by a drain and by
 * a revocation, no failure.
 *
 * Drain: rank 0 has two persistent 1 MiB + 5 sends to rank 1: Q, whose
 * round rank 1 received, and P, started and never received.  Both ranks
 * call FTW_Comm_drain_all(MPI_COMM_WORLD).  Asserts:
 *  - the drain succeeds; rank 0's wait on P ends within 5 s with
 *    MPI_SUCCESS or FTW_ERR_DRAINED, its handle kept;
 *  - starting P or Q again fails with FTW_ERR_DRAINED (a persistent
 *    request from before a drain is not started after it); both are
 *    freed;
 *  - a new persistent send after the drain, same tag, is the message
 *    rank 1 receives (checksum), and no message from before the drain is
 *    left to match.
 * Revocation: rank 0 starts a persistent 1 MiB send S on a duplicate of
 * MPI_COMM_WORLD that rank 1 never receives; rank 1 revokes the
 * duplicate.  Asserts:
 *  - rank 0's wait on S ends within 5 s with MPIX_ERR_REVOKED, its
 *    handle kept; starting S again fails with MPIX_ERR_REVOKED; S is
 *    freed;
 *  - a persistent rendezvous send on MPI_COMM_WORLD still delivers
 *    intact afterwards.
 */
#include "tap.h"

#include <mpi-ext.h>
#include <stdlib.h>
#include <string.h>

#include "ftwrap.h"

#define LEN ((1u << 20) + 5)
#define TAG 3

static int rank;
static unsigned char *buf, *buf2;

static int drain_part(void)
{
    MPI_Request p, q, r, held;
    MPI_Status st;
    int rc, ok = 1, flag = 0, count = -1;
    double t0, dt;

    if (rank == 0) {
        tap_fill(buf2, LEN, 9);
        MPI_Send_init(buf2, LEN, MPI_BYTE, 1, TAG + 1, MPI_COMM_WORLD, &q);
        MPI_Start(&q);
        ok &= MPI_Wait(&q, MPI_STATUS_IGNORE) == MPI_SUCCESS;
        tap_fill(buf, LEN, 1);
        MPI_Send_init(buf, LEN, MPI_BYTE, 1, TAG, MPI_COMM_WORLD, &p);
        MPI_Start(&p);
    } else {
        rc = MPI_Recv(buf2, LEN, MPI_BYTE, 0, TAG + 1, MPI_COMM_WORLD, &st);
        ok &= rc == MPI_SUCCESS && tap_check(buf2, LEN, 9);
    }
    rc = FTW_Comm_drain_all(MPI_COMM_WORLD);
    tap_ok(rc == MPI_SUCCESS, "FTW_Comm_drain_all succeeds (%s)",
           class_name(class_of(rc)));
    if (rank == 0) {
        held = p;
        t0 = MPI_Wtime();
        rc = MPI_Wait(&p, MPI_STATUS_IGNORE);
        dt = MPI_Wtime() - t0;
        if (!(rc == MPI_SUCCESS || class_of(rc) == FTW_ERR_DRAINED) ||
            dt > 5.0 || p != held) {
            tap_diag("wait on the cut send: %s after %.3f s, handle %s",
                     class_name(class_of(rc)), dt,
                     p == held ? "kept" : "changed");
            ok = 0;
        }
    }
    tap_ok(ok, "the started persistent send from before the drain ends "
           "within 5 s (success or FTW_ERR_DRAINED), handle kept");
    ok = 1;
    if (rank == 0) {
        rc = MPI_Start(&p);
        ok &= class_of(rc) == FTW_ERR_DRAINED;
        rc = MPI_Start(&q);
        ok &= class_of(rc) == FTW_ERR_DRAINED;
        ok &= MPI_Request_free(&p) == MPI_SUCCESS && p == MPI_REQUEST_NULL;
        ok &= MPI_Request_free(&q) == MPI_SUCCESS && q == MPI_REQUEST_NULL;
    }
    tap_ok(ok, "starting them again fails with FTW_ERR_DRAINED; both freed");
    ok = 1;
    if (rank == 0) {
        tap_fill(buf, LEN, 2);
        ok &= MPI_Send_init(buf, LEN, MPI_BYTE, 1, TAG, MPI_COMM_WORLD,
                            &r) == MPI_SUCCESS;
        ok &= MPI_Start(&r) == MPI_SUCCESS;
        ok &= MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS;
        ok &= MPI_Request_free(&r) == MPI_SUCCESS;
    } else {
        memset(buf, 0, LEN);
        rc = MPI_Recv(buf, LEN, MPI_BYTE, 0, TAG, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_BYTE, &count);
        ok &= rc == MPI_SUCCESS && count == (int)LEN && tap_check(buf, LEN, 2);
        MPI_Iprobe(0, TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        ok &= !flag;
        if (!ok)
            tap_diag("after the drain: rc %d count %d, left %d", rc, count,
                     flag);
    }
    tap_ok(ok, "a persistent send after the drain is the message received; "
           "nothing from before it is left");
    return 0;
}

static int revoke_part(void)
{
    MPI_Comm dup;
    MPI_Request s, held;
    int rc, ok = 1;
    double t0, dt;

    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    if (rank == 0) {
        tap_fill(buf, LEN, 5);
        MPI_Send_init(buf, LEN, MPI_BYTE, 1, TAG, dup, &s);
        MPI_Start(&s);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1)
        MPIX_Comm_revoke(dup);
    if (rank == 0) {
        held = s;
        t0 = MPI_Wtime();
        rc = MPI_Wait(&s, MPI_STATUS_IGNORE);
        dt = MPI_Wtime() - t0;
        if (class_of(rc) != MPIX_ERR_REVOKED || dt > 5.0 || s != held) {
            tap_diag("wait on the revoked send: %s after %.3f s, handle %s",
                     class_name(class_of(rc)), dt,
                     s == held ? "kept" : "changed");
            ok = 0;
        }
    }
    tap_ok(ok, "a started persistent send on a communicator revoked by its "
           "receiver ends within 5 s with MPIX_ERR_REVOKED, handle kept");
    ok = 1;
    if (rank == 0) {
        rc = MPI_Start(&s);
        ok &= class_of(rc) == MPIX_ERR_REVOKED;
        if (!ok)
            tap_diag("start after the revocation: %s",
                     class_name(class_of(rc)));
        ok &= MPI_Request_free(&s) == MPI_SUCCESS && s == MPI_REQUEST_NULL;
    }
    tap_ok(ok, "starting it again fails with MPIX_ERR_REVOKED; freed");
    ok = 1;
    if (rank == 0) {
        tap_fill(buf, LEN, 6);
        ok &= MPI_Send_init(buf, LEN, MPI_BYTE, 1, TAG + 2, MPI_COMM_WORLD,
                            &s) == MPI_SUCCESS;
        for (int i = 0; i < 3 && ok; i++) {
            ok &= MPI_Start(&s) == MPI_SUCCESS;
            ok &= MPI_Wait(&s, MPI_STATUS_IGNORE) == MPI_SUCCESS;
        }
        ok &= MPI_Request_free(&s) == MPI_SUCCESS;
    } else {
        for (int i = 0; i < 3 && ok; i++) {
            memset(buf, 0, LEN);
            rc = MPI_Recv(buf, LEN, MPI_BYTE, 0, TAG + 2, MPI_COMM_WORLD,
                          MPI_STATUS_IGNORE);
            ok &= rc == MPI_SUCCESS && tap_check(buf, LEN, 6);
        }
    }
    tap_ok(ok, "persistent rendezvous sends on MPI_COMM_WORLD deliver "
           "intact afterwards");
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (!tap_need_size(2))
        return 0;
    buf = malloc(LEN);
    buf2 = malloc(LEN);
    if (buf == NULL || buf2 == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    tap_plan(7);
    drain_part();
    revoke_part();
    free(buf);
    free(buf2);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return tap_status();
}
