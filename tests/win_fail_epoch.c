/* ftw-test: np=3 mode=ftwrap timeout=90 link=ftwrap expect-failed=2 fate=2:signal:KILL */
/*
 * win_fail_epoch - a window's process dies inside open epochs: the
 * epochs end in error, nothing hangs, and the survivors go on.
 *
 * Three ranks, MPI_ERRORS_RETURN on four windows (MPI_Win_create):
 * lock/unlock, lock_all + flush, request-based (MPI_Rget under lock_all)
 * and post/start/complete/wait.
 *   - Rank 0 opens an epoch on each passive-target window while rank 2
 *     lives: an exclusive lock of rank 2 with a put and a flush, lock_all
 *     with puts to ranks 1 and 2 and flush_all, lock_all with an MPI_Rget
 *     of rank 2's block (checked).  Rank 2 then leaves MPI, computes for
 *     200 ms and SIGKILLs itself without ever posting.
 *   - Meanwhile ranks 0 and 1 call MPI_Win_start for target {2}: both MPIs
 *     wait inside their own start for the target's post; under ftwrap the
 *     start fails with FTW_ERR_PROC_FAIL_STOP when rank 2 dies.
 *   - Rank 0's open epochs, the death known: a put and a flush to rank 2,
 *     a put to the live rank 1 and flush_all, an MPI_Rget and both
 *     unlocks all fail with FTW_ERR_PROC_FAIL_STOP, none hangs.
 * Then FTW_Comm_validate, FTW_Win_validate of two windows and
 * FTW_Iwin_validate (both pending at once) of the other two, and one
 * checked epoch per mode between the survivors (4 KiB checksummed
 * blocks), and MPI_Win_free of each.
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftwrap.h"
#include "tap.h"

#define N 1024

enum { W_LOCK, W_ALL, W_REQ, W_PSCW, NWIN };

static int is_fail(int rc)
{
    return tap_class(rc) == FTW_ERR_PROC_FAIL_STOP;
}

int main(int argc, char **argv)
{
    MPI_Win win[NWIN];
    MPI_Group world_g, two_g, other_g, failed;
    MPI_Comm v;
    MPI_Request req;
    int *mem[NWIN], *src = malloc(N * sizeof(int)),
        *got = malloc(N * sizeof(int));
    int rank, other, two = 2, rc, ok, start_ok, open_ok = 1, i, go = 1;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_dup(MPI_COMM_WORLD, &v);
    MPI_Comm_set_errhandler(v, MPI_ERRORS_RETURN);
    other = 1 - rank;
    MPI_Comm_group(MPI_COMM_WORLD, &world_g);
    MPI_Group_incl(world_g, 1, &two, &two_g);
    MPI_Group_incl(world_g, 1, rank < 2 ? &other : &two, &other_g);
    for (i = 0; i < NWIN; i++) {
        mem[i] = malloc(N * sizeof(int));
        tap_fill(mem[i], N * sizeof(int), 50 + rank);
        MPI_Win_create(mem[i], N * sizeof(int), sizeof(int), MPI_INFO_NULL,
                       MPI_COMM_WORLD, &win[i]);
        MPI_Win_set_errhandler(win[i], MPI_ERRORS_RETURN);
    }
    tap_fill(src, N * sizeof(int), 10 + rank);
    MPI_Barrier(MPI_COMM_WORLD);

    if (rank == 2) {
        /* In MPI while rank 0 opens its epochs, then gone. */
        MPI_Recv(&go, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        tap_spin(0.2);
        raise(SIGKILL);
    }
    if (rank == 0) {
        rc = MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 2, 0, win[W_LOCK]);
        rc |= MPI_Put(src, N, MPI_INT, 2, 0, N, MPI_INT, win[W_LOCK]);
        rc |= MPI_Win_flush(2, win[W_LOCK]);
        rc |= MPI_Win_lock_all(0, win[W_ALL]);
        rc |= MPI_Put(src, N, MPI_INT, 1, 0, N, MPI_INT, win[W_ALL]);
        rc |= MPI_Put(src, N, MPI_INT, 2, 0, N, MPI_INT, win[W_ALL]);
        rc |= MPI_Win_flush_all(win[W_ALL]);
        rc |= MPI_Win_lock_all(0, win[W_REQ]);
        rc |= MPI_Rget(got, N, MPI_INT, 2, 0, N, MPI_INT, win[W_REQ], &req);
        rc |= MPI_Wait(&req, MPI_STATUS_IGNORE);
        open_ok = rc == MPI_SUCCESS && tap_check(got, N * sizeof(int), 52);
        MPI_Send(&go, 1, MPI_INT, 2, 7, MPI_COMM_WORLD);
    }

    /* Both survivors wait in start for the post rank 2 never makes. */
    start_ok = is_fail(MPI_Win_start(two_g, 0, win[W_PSCW]));

    ok = 1;
    if (rank == 0) {
        ok &= is_fail(MPI_Put(src, N, MPI_INT, 2, 0, N, MPI_INT,
                              win[W_LOCK]));
        ok &= is_fail(MPI_Win_flush(2, win[W_LOCK]));
        ok &= is_fail(MPI_Win_unlock(2, win[W_LOCK]));
        ok &= is_fail(MPI_Put(src, N, MPI_INT, 1, 0, N, MPI_INT,
                              win[W_ALL]));
        ok &= is_fail(MPI_Win_flush_all(win[W_ALL]));
        ok &= is_fail(MPI_Win_unlock_all(win[W_ALL]));
        ok &= is_fail(MPI_Rget(got, N, MPI_INT, 2, 0, N, MPI_INT,
                               win[W_REQ], &req));
        ok &= is_fail(MPI_Win_unlock_all(win[W_REQ]));
    }

    rc = FTW_Comm_validate(v, &failed);
    if (rc != MPI_SUCCESS) {
        tap_diag("FTW_Comm_validate: %d", rc);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Group_free(&failed);
    tap_plan(8);
    tap_ok_comm(v, open_ok, "epochs opened before the death work: lock + "
                "put + flush, lock_all + puts + flush_all, MPI_Rget of the "
                "later victim's block (checked)");
    tap_ok_comm(v, start_ok, "MPI_Win_start waiting for a target that "
                "dies before it posts fails with FTW_ERR_PROC_FAIL_STOP");
    tap_ok_comm(v, ok, "in the open epochs, after the death: put, flush, "
                "unlock, flush_all, unlock_all and MPI_Rget fail with "
                "FTW_ERR_PROC_FAIL_STOP, also toward the live rank");

    ok = 1;
    for (i = 0; i < W_REQ; i++) {
        rc = FTW_Win_validate(win[i], &failed);
        if (rc != MPI_SUCCESS) {
            tap_diag("FTW_Win_validate(window %d): rc %d", i, rc);
            ok = 0;
        } else {
            MPI_Group_free(&failed);
        }
    }
    {
        MPI_Group ifailed[2];
        MPI_Request vreq[2];
        int n;

        rc = FTW_Iwin_validate(win[W_REQ], &ifailed[0], &vreq[0]);
        rc |= FTW_Iwin_validate(win[W_PSCW], &ifailed[1], &vreq[1]);
        for (i = 0; rc == MPI_SUCCESS && i < 2; i++)
            rc = MPI_Wait(&vreq[i], MPI_STATUS_IGNORE);
        for (i = 0; rc == MPI_SUCCESS && i < 2; i++) {
            MPI_Group_size(ifailed[i], &n);
            ok &= n == 1;
            MPI_Group_free(&ifailed[i]);
        }
        if (rc != MPI_SUCCESS) {
            tap_diag("FTW_Iwin_validate: rc %d", rc);
            ok = 0;
        }
    }
    tap_ok_comm(v, ok, "FTW_Win_validate of two windows, FTW_Iwin_validate "
                "of the other two (one failed process each)");

    /* One checked epoch per mode between ranks 0 and 1. */
    tap_fill(src, N * sizeof(int), 100 + rank);
    rc = MPI_Win_lock(MPI_LOCK_EXCLUSIVE, other, 0, win[W_LOCK]);
    rc |= MPI_Put(src, N, MPI_INT, other, 0, N, MPI_INT, win[W_LOCK]);
    rc |= MPI_Win_unlock(other, win[W_LOCK]);
    rc |= MPI_Win_lock_all(0, win[W_ALL]);
    rc |= MPI_Put(src, N, MPI_INT, other, 0, N, MPI_INT, win[W_ALL]);
    rc |= MPI_Win_flush(other, win[W_ALL]);
    rc |= MPI_Win_unlock_all(win[W_ALL]);
    MPI_Barrier(v);
    MPI_Win_sync(win[W_LOCK]);
    MPI_Win_sync(win[W_ALL]);
    tap_ok_comm(v, rc == MPI_SUCCESS &&
                tap_check(mem[W_LOCK], N * sizeof(int), 100 + other) &&
                tap_check(mem[W_ALL], N * sizeof(int), 100 + other),
                "lock/unlock and lock_all + flush between the survivors: "
                "the blocks arrive");

    memcpy(mem[W_REQ], src, N * sizeof(int));
    MPI_Barrier(v);
    memset(got, 0, N * sizeof(int));
    rc = MPI_Win_lock_all(0, win[W_REQ]);
    rc |= MPI_Rget(got, N, MPI_INT, other, 0, N, MPI_INT, win[W_REQ], &req);
    rc |= MPI_Wait(&req, MPI_STATUS_IGNORE);
    rc |= MPI_Win_unlock_all(win[W_REQ]);
    tap_ok_comm(v, rc == MPI_SUCCESS &&
                tap_check(got, N * sizeof(int), 100 + other),
                "MPI_Rget between the survivors reads the other's block");

    if (rank == 0) {
        rc = MPI_Win_post(other_g, 0, win[W_PSCW]);
        rc |= MPI_Win_wait(win[W_PSCW]);
        ok = rc == MPI_SUCCESS &&
             tap_check(mem[W_PSCW], N * sizeof(int), 101);
    } else {
        rc = MPI_Win_start(other_g, 0, win[W_PSCW]);
        rc |= MPI_Put(src, N, MPI_INT, 0, 0, N, MPI_INT, win[W_PSCW]);
        rc |= MPI_Win_complete(win[W_PSCW]);
        ok = rc == MPI_SUCCESS;
    }
    tap_ok_comm(v, ok, "post/start/complete/wait between the survivors: "
                "the block arrives");

    MPI_Barrier(v);
    ok = 1;
    for (i = 0; i < NWIN; i++)
        ok &= MPI_Win_free(&win[i]) == MPI_SUCCESS && win[i] == MPI_WIN_NULL;
    tap_ok_comm(v, ok, "MPI_Win_free returns on every window");
    for (i = 0; i < NWIN; i++)
        free(mem[i]);
    MPI_Group_free(&world_g);
    MPI_Group_free(&two_g);
    MPI_Group_free(&other_g);
    MPI_Comm_free(&v);
    free(src);
    free(got);
    MPI_Finalize();
    return tap_status();
}
