/* ftw-test: np=3 mode=ftwrap timeout=90 link=ftwrap expect-failed=2 fate=2:signal:KILL */
/*
 * win_fail_during - a window's process dies inside an epoch, while the
 * others already wait for it: they get errors, not hangs.
 *
 * Three ranks, MPI_ERRORS_RETURN on two windows.
 *   - fence: every rank puts a block into its right neighbour; ranks 0 and
 *     1 enter MPI_Win_fence at once, rank 2 is SIGKILLed 200 ms later
 *     without ever entering it: the fence fails with
 *     FTW_ERR_PROC_FAIL_STOP on both survivors.
 *   - post/start/complete/wait on the second window (made before): rank 0
 *     posts to origins {1, 2} and waits; rank 1 starts, puts and
 *     completes; rank 2 would have: MPI_Win_wait fails instead of waiting
 *     for the dead origin.
 * Then FTW_Win_validate and a checked epoch between the survivors: fence
 * on Open MPI; on MPICH lock_all + flush, as its fence waits for the dead
 * rank while rank 1's put to it is in flight.
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftwrap.h"
#include "tap.h"

#define N 1024

static int is_fail(int rc)
{
    return tap_class(rc) == FTW_ERR_PROC_FAIL_STOP;
}

int main(int argc, char **argv)
{
    MPI_Win wf, wp;
    MPI_Group world_g, origins, zero_g, failed;
    MPI_Comm v;
    int *a = calloc(N, sizeof(int)), *b = calloc(N, sizeof(int));
    int *src = malloc(N * sizeof(int)), rank, right, rc, ok, fence_rc,
        wait_ok = 1, zero = 0, two[2] = { 1, 2 };

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_dup(MPI_COMM_WORLD, &v);
    MPI_Comm_set_errhandler(v, MPI_ERRORS_RETURN);
    MPI_Comm_group(MPI_COMM_WORLD, &world_g);
    MPI_Group_incl(world_g, 2, two, &origins);
    MPI_Group_incl(world_g, 1, &zero, &zero_g);
    MPI_Win_create(a, N * sizeof(int), sizeof(int), MPI_INFO_NULL,
                   MPI_COMM_WORLD, &wf);
    MPI_Win_create(b, N * sizeof(int), sizeof(int), MPI_INFO_NULL,
                   MPI_COMM_WORLD, &wp);
    MPI_Win_set_errhandler(wf, MPI_ERRORS_RETURN);
    MPI_Win_set_errhandler(wp, MPI_ERRORS_RETURN);
    right = (rank + 1) % 3;
    tap_fill(src, N * sizeof(int), 10 + rank);
    MPI_Win_fence(0, wf);
    MPI_Put(src, N, MPI_INT, right, 0, N, MPI_INT, wf);
    if (rank == 2) {
        usleep(200000);
        raise(SIGKILL);
    }
    fence_rc = MPI_Win_fence(0, wf);

    if (rank == 0) {
        MPI_Win_post(origins, 0, wp);
        wait_ok = is_fail(MPI_Win_wait(wp));
    } else {
        MPI_Win_start(zero_g, 0, wp);
        MPI_Put(src, N, MPI_INT, 0, 0, N, MPI_INT, wp);
        MPI_Win_complete(wp);
    }

    rc = FTW_Comm_validate(v, &failed);
    if (rc != MPI_SUCCESS) {
        tap_diag("FTW_Comm_validate: %d", rc);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Group_free(&failed);
    tap_plan(4);
    tap_ok_comm(v, is_fail(fence_rc), "MPI_Win_fence waiting for a rank "
                "that dies in the epoch fails with FTW_ERR_PROC_FAIL_STOP");
    tap_ok_comm(v, wait_ok, "MPI_Win_wait for an origin that dies fails "
                "instead of waiting");

    rc = FTW_Win_validate(wf, &failed);
    ok = rc == MPI_SUCCESS;
    if (ok)
        MPI_Group_free(&failed);
    tap_ok_comm(v, ok, "FTW_Win_validate after the death");
    memset(a, 0, N * sizeof(int));
#if defined(MPICH_VERSION)
    /* MPICH 4.0 (ch4:ucx): with rank 1's put to the dead rank 2 left in
     * flight, MPI_Win_fence on any window waits inside MPICH for the dead
     * process (README); a passive-target epoch per target works. */
    MPI_Win_lock_all(0, wf);
    MPI_Put(src, N, MPI_INT, 1 - rank, 0, N, MPI_INT, wf);
    MPI_Win_flush(1 - rank, wf);
    rc = MPI_Win_unlock_all(wf);
    MPI_Barrier(v);
#else
    MPI_Win_fence(0, wf);
    MPI_Put(src, N, MPI_INT, 1 - rank, 0, N, MPI_INT, wf);
    rc = MPI_Win_fence(0, wf);
#endif
    tap_ok_comm(v, rc == MPI_SUCCESS &&
                tap_check(a, N * sizeof(int), 10 + (1 - rank)),
                "a checked epoch between the survivors afterwards (fence; "
                "on MPICH lock_all + flush)");
    MPI_Win_free(&wf);
    MPI_Win_free(&wp);
    MPI_Group_free(&world_g);
    MPI_Group_free(&origins);
    MPI_Group_free(&zero_g);
    MPI_Comm_free(&v);
    free(a);
    free(b);
    free(src);
    MPI_Finalize();
    return tap_status();
}
