/* ftw-test: np=3 mode=ftwrap timeout=90 link=ftwrap expect-failed=2 fate=2:signal:KILL */
/*
 * win_fail - a window's process dies: every synchronisation mode fails
 * instead of hanging, and FTW_Win_validate makes the window work again
 * over the survivors, on the same memory.
 *
 * Three ranks make five windows (MPI_ERRORS_RETURN on each), one per
 * synchronisation mode: fence (MPI_Win_create), lock/unlock
 * (MPI_Win_allocate), lock_all + flush (MPI_Win_create), post/start/
 * complete/wait (MPI_Win_allocate), request-based MPI_Rget under lock_all
 * (MPI_Win_create).  Every window opens a fence epoch; then rank 2
 * SIGKILLs itself.  Ranks 0 and 1:
 *   - fence: MPI_Put to each other and MPI_Win_fence: an error
 *     (FTW_ERR_PROC_FAIL_STOP), not a hang;
 *   - lock: MPI_Win_lock of rank 2, lock_all, MPI_Win_start with rank 2
 *     in the group, MPI_Rget from rank 2: each fails with
 *     FTW_ERR_PROC_FAIL_STOP, and so does an RMA call to a live rank on
 *     the invalidated window;
 *   - FTW_Win_group_failed names rank 2, and the failure handler
 *     registered on one window (FTW_Win_set_failhandler) was called;
 *   - FTW_Win_validate gives every window's survivors the failed group
 *     {2}; then each mode moves a checksummed 4 KiB block between ranks 0
 *     and 1 and the receiver checks it, and a lock of the excluded rank 2
 *     still fails;
 *   - MPI_Win_free returns on every window.
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftwrap.h"
#include "tap.h"

#define N 1024                  /* ints per window */
#define NWIN 5

enum { W_FENCE, W_LOCK, W_ALL, W_PSCW, W_REQ };

static const char *mode_name[NWIN] = {
    "fence", "lock/unlock", "lock_all + flush", "post/start/complete/wait",
    "request-based MPI_Rget",
};

/* The window failure handler: counts its calls for win[W_ALL]. */
static MPI_Win handled_win = MPI_WIN_NULL;
static int handled, handled_code;

static void on_failure(MPI_Win *win, int *code, ...)
{
    if (*win == handled_win) {
        handled++;
        handled_code = *code;
    }
}

static int is_fail(int rc)
{
    return tap_class(rc) == FTW_ERR_PROC_FAIL_STOP;
}

/* The failed group of the window, as ranks: 1 if it is exactly {2}. */
static int only_rank2(MPI_Win win, MPI_Group failed)
{
    MPI_Group g;
    int n = -1, r0 = 0, r = -1;

    MPI_Group_size(failed, &n);
    MPI_Win_get_group(win, &g);
    if (n == 1)
        MPI_Group_translate_ranks(failed, 1, &r0, g, &r);
    MPI_Group_free(&g);
    return n == 1 && r == 2;
}

int main(int argc, char **argv)
{
    MPI_Win win[NWIN];
    MPI_Group world_g, other_g, two_g, failed;
    MPI_Comm v;
    int *mem[NWIN], *src = malloc(N * sizeof(int));
    int rank, other, two = 2, rc, ok, i;
    MPI_Request req;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_dup(MPI_COMM_WORLD, &v);
    MPI_Comm_set_errhandler(v, MPI_ERRORS_RETURN);
    other = 1 - rank;
    MPI_Comm_group(MPI_COMM_WORLD, &world_g);
    MPI_Group_incl(world_g, 1, rank < 2 ? &other : &two, &other_g);
    MPI_Group_incl(world_g, 1, &two, &two_g);

    for (i = 0; i < NWIN; i++) {
        if (i == W_LOCK || i == W_PSCW) {
            MPI_Win_allocate(N * sizeof(int), sizeof(int), MPI_INFO_NULL,
                             MPI_COMM_WORLD, &mem[i], &win[i]);
        } else {
            mem[i] = calloc(N, sizeof(int));
            MPI_Win_create(mem[i], N * sizeof(int), sizeof(int),
                           MPI_INFO_NULL, MPI_COMM_WORLD, &win[i]);
        }
        memset(mem[i], 0, N * sizeof(int));
        MPI_Win_set_errhandler(win[i], MPI_ERRORS_RETURN);
        MPI_Win_fence(0, win[i]);
    }
    /* MPI_PROC_NULL is a valid target (MPICH's is -1, which must not be
     * taken for an excluded rank); Open MPI 4.1 refuses a lock of it
     * without ftwrap too. */
    rc = MPI_Put(&rank, 1, MPI_INT, MPI_PROC_NULL, 0, 1, MPI_INT,
                 win[W_FENCE]);
    rc |= MPI_Win_fence(0, win[W_FENCE]);
#if defined(MPICH_VERSION)
    rc |= MPI_Win_lock(MPI_LOCK_EXCLUSIVE, MPI_PROC_NULL, 0, win[W_LOCK]);
    rc |= MPI_Put(&rank, 1, MPI_INT, MPI_PROC_NULL, 0, 1, MPI_INT,
                  win[W_LOCK]);
    rc |= MPI_Win_unlock(MPI_PROC_NULL, win[W_LOCK]);
#endif
    ok = rc == MPI_SUCCESS;
    {
        MPI_Errhandler eh, got = MPI_ERRHANDLER_NULL;

        MPI_Win_create_errhandler(on_failure, &eh);
        handled_win = win[W_ALL];
        rc = FTW_Win_set_failhandler(win[W_ALL], eh);
        FTW_Win_get_failhandler(win[W_ALL], &got);
        ok = ok && rc == MPI_SUCCESS && got == eh;
        MPI_Errhandler_free(&eh);
    }
    /* On v (errors return): the victim may die before a slower rank's
     * barrier saw it complete, which then fails. */
    MPI_Barrier(v);
    if (rank == 2)
        raise(SIGKILL);

    tap_plan(11);
    tap_ok_local(ok, "MPI_PROC_NULL as a target (of a put; on MPICH also of "
                 "lock and unlock); FTW_Win_set_failhandler registers");
    /* The failure, in every mode. */
    rc = MPI_Put(&rank, 1, MPI_INT, other, 0, 1, MPI_INT, win[W_FENCE]);
    if (rc == MPI_SUCCESS)
        rc = MPI_Win_fence(0, win[W_FENCE]);
    ok = is_fail(rc);
    rc = MPI_Win_lock(MPI_LOCK_SHARED, 2, 0, win[W_LOCK]);
    ok = ok && is_fail(rc);
    rc = MPI_Win_lock_all(0, win[W_ALL]);
    ok = ok && is_fail(rc);
    rc = MPI_Win_start(two_g, 0, win[W_PSCW]);
    ok = ok && is_fail(rc);
    rc = MPI_Rget(src, 1, MPI_INT, 2, 0, 1, MPI_INT, win[W_REQ], &req);
    if (rc == MPI_SUCCESS)
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    ok = ok && is_fail(rc);
    rc = FTW_Comm_validate(v, &failed);
    if (rc != MPI_SUCCESS) {
        tap_diag("FTW_Comm_validate: %d", rc);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Group_free(&failed);
    tap_ok_comm(v, ok, "after a death every mode fails with "
                "FTW_ERR_PROC_FAIL_STOP (fence, lock of the dead rank, "
                "lock_all, start, MPI_Rget), none hangs");
    rc = MPI_Put(&rank, 1, MPI_INT, other, 0, 1, MPI_INT, win[W_LOCK]);
    tap_ok_comm(v, is_fail(rc), "an RMA call to a live rank on the "
                "invalidated window fails too");
    rc = FTW_Win_group_failed(win[W_ALL], &failed);
    ok = rc == MPI_SUCCESS && only_rank2(win[W_ALL], failed);
    if (rc == MPI_SUCCESS)
        MPI_Group_free(&failed);
    tap_ok_comm(v, ok, "FTW_Win_group_failed names the dead rank");
    tap_ok_comm(v, handled >= 1 && handled_code == FTW_ERR_PROC_FAIL_STOP,
                "the window's failure handler (FTW_Win_set_failhandler) "
                "was called with the window and FTW_ERR_PROC_FAIL_STOP");

    ok = 1;
    for (i = 0; i < NWIN; i++) {
        rc = FTW_Win_validate(win[i], &failed);
        if (rc != MPI_SUCCESS || !only_rank2(win[i], failed)) {
            tap_diag("FTW_Win_validate(%s): rc %d", mode_name[i], rc);
            ok = 0;
        }
        if (rc == MPI_SUCCESS)
            MPI_Group_free(&failed);
    }
    tap_ok_comm(v, ok, "FTW_Win_validate gives every window's survivors "
                "the failed group {2}");

    /* Each mode between the survivors, checked. */
    tap_fill(src, N * sizeof(int), 100 + rank);
    MPI_Win_fence(0, win[W_FENCE]);
    MPI_Put(src, N, MPI_INT, other, 0, N, MPI_INT, win[W_FENCE]);
    rc = MPI_Win_fence(0, win[W_FENCE]);
    tap_ok_comm(v, rc == MPI_SUCCESS &&
                tap_check(mem[W_FENCE], N * sizeof(int), 100 + other),
                "fence after validate: checksummed 4 KiB puts arrive");

    if (rank == 0) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win[W_LOCK]);
        MPI_Put(src, N, MPI_INT, 1, 0, N, MPI_INT, win[W_LOCK]);
        rc = MPI_Win_unlock(1, win[W_LOCK]);
        MPI_Win_lock_all(0, win[W_ALL]);
        MPI_Put(src, N, MPI_INT, 1, 0, N, MPI_INT, win[W_ALL]);
        MPI_Win_flush(1, win[W_ALL]);
        rc |= MPI_Win_unlock_all(win[W_ALL]);
    }
    MPI_Barrier(v);
    MPI_Win_sync(win[W_LOCK]);
    ok = rank == 0 ? rc == MPI_SUCCESS :
         tap_check(mem[W_LOCK], N * sizeof(int), 100) &&
         tap_check(mem[W_ALL], N * sizeof(int), 100);
    tap_ok_comm(v, ok, "lock/unlock and lock_all + flush after validate: "
                "the data arrives");

    if (rank == 0) {
        MPI_Win_post(other_g, 0, win[W_PSCW]);
        rc = MPI_Win_wait(win[W_PSCW]);
        ok = rc == MPI_SUCCESS &&
             tap_check(mem[W_PSCW], N * sizeof(int), 101);
    } else {
        MPI_Win_start(other_g, 0, win[W_PSCW]);
        MPI_Put(src, N, MPI_INT, 0, 0, N, MPI_INT, win[W_PSCW]);
        ok = MPI_Win_complete(win[W_PSCW]) == MPI_SUCCESS;
    }
    tap_ok_comm(v, ok, "post/start/complete/wait after validate: the data "
                "arrives");

    memcpy(mem[W_REQ], src, N * sizeof(int));
    MPI_Barrier(v);
    MPI_Win_lock_all(0, win[W_REQ]);
    memset(src, 0, N * sizeof(int));
    rc = MPI_Rget(src, N, MPI_INT, other, 0, N, MPI_INT, win[W_REQ], &req);
    if (rc == MPI_SUCCESS)
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Win_unlock_all(win[W_REQ]);
    ok = rc == MPI_SUCCESS && tap_check(src, N * sizeof(int), 100 + other);
    rc = MPI_Win_lock(MPI_LOCK_SHARED, 2, 0, win[W_LOCK]);
    tap_ok_comm(v, ok && is_fail(rc), "MPI_Rget after validate reads the "
                "other survivor's block; a lock of the excluded rank fails");

    MPI_Barrier(v);
    ok = 1;
    for (i = 0; i < NWIN; i++) {
        rc = MPI_Win_free(&win[i]);
        ok = ok && rc == MPI_SUCCESS && win[i] == MPI_WIN_NULL;
        if (i != W_LOCK && i != W_PSCW)
            free(mem[i]);
    }
    tap_ok_comm(v, ok, "MPI_Win_free returns on every window");
    MPI_Group_free(&world_g);
    MPI_Group_free(&other_g);
    MPI_Group_free(&two_g);
    MPI_Comm_free(&v);
    free(src);
    MPI_Finalize();
    return tap_status();
}
