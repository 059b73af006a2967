/* ftw-test: np=3 mode=ftwrap timeout=60 expect-failed=2 fate=2:signal:KILL */
/*
 * wait_done_sends - MPI_Waitall with statuses ignored over a halo
 * exchange's window: small sends that completed at once (both MPIs give
 * them one shared, already complete handle) among receives still
 * pending, with and without a send to a failed process in the set.
 *
 * Three ranks; rank 2 SIGKILLs itself.  Ranks 0 and 1 exchange ROUNDS
 * windows: each posts WINDOW receives of 8 bytes from the other, then
 * WINDOW sends of 8 bytes to it, then one MPI_Waitall(MPI_STATUSES_IGNORE).
 * 1: every call returns MPI_SUCCESS, every handle is MPI_REQUEST_NULL
 * after it, and every slot holds what the other rank sent that round, on
 * both ranks.  2: once rank 1 knows rank 2 failed, one more window with
 * an MPI_Isend to rank 2 among its sends: MPI_Waitall ends in error
 * (MPI_ERR_IN_STATUS or MPIX_ERR_PROC_FAILED), the live exchange's
 * handles are all MPI_REQUEST_NULL and its data arrived on both ranks.
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <stdint.h>
#include <string.h>

#include "tap.h"

#define ROUNDS 50
#define WINDOW 64

static uint64_t word(int from, int round, int slot)
{
    return ((uint64_t)(from + 1) << 48) ^ ((uint64_t)round << 16) ^
           (uint64_t)slot;
}

/* One window with the other live rank; extra (or MPI_REQUEST_NULL) is a
 * request to wait for with it.  1 if every handle of the exchange is null
 * afterwards and every slot holds the other rank's word; *rc_p the
 * MPI_Waitall's return. */
static int window(int rank, int round, MPI_Request extra, int *rc_p)
{
    static uint64_t in[WINDOW], out[WINDOW];
    MPI_Request req[2 * WINDOW + 1];
    /* Through a volatile: MPICH's mpi.h declares the statuses an array
     * of n, which the compiler holds against MPI_STATUSES_IGNORE. */
    MPI_Status *volatile ignore = MPI_STATUSES_IGNORE;
    int other = 1 - rank, n = 2 * WINDOW, ok = 1;

    memset(in, 0, sizeof(in));
    for (int w = 0; w < WINDOW; w++) {
        out[w] = word(rank, round, w);
        MPI_Irecv(&in[w], 8, MPI_BYTE, other, w, MPI_COMM_WORLD, &req[w]);
    }
    for (int w = 0; w < WINDOW; w++)
        MPI_Isend(&out[w], 8, MPI_BYTE, other, w, MPI_COMM_WORLD,
                  &req[WINDOW + w]);
    if (extra != MPI_REQUEST_NULL)
        req[n++] = extra;
    *rc_p = MPI_Waitall(n, req, ignore);
    for (int i = 0; i < 2 * WINDOW; i++)
        ok &= req[i] == MPI_REQUEST_NULL;
    for (int w = 0; w < WINDOW; w++)
        ok &= in[w] == word(other, round, w);
    return ok;
}

int main(int argc, char **argv)
{
    int rank, rc = MPI_SUCCESS, ok = 1, other_ok = 0;
    char byte = 0;

    MPI_Init(&argc, &argv);
    if (!tap_need_victim(3, 2, &rank))
        return 0;
    tap_rank_ = rank == 1 ? 0 : 1;  /* rank 1 prints the verdicts */
    if (rank == 1)
        tap_plan(2);
    for (int r = 0; r < ROUNDS; r++) {
        ok &= window(rank, r, MPI_REQUEST_NULL, &rc);
        ok &= rc == MPI_SUCCESS;
    }
    if (rank == 0) {
        MPI_Send(&ok, 1, MPI_INT, 1, 1000, MPI_COMM_WORLD);
        ok = window(rank, ROUNDS, MPI_REQUEST_NULL, &rc) &&
             rc == MPI_SUCCESS;
        MPI_Send(&ok, 1, MPI_INT, 1, 1001, MPI_COMM_WORLD);
        MPI_Finalize();
        return 0;
    }
    MPI_Recv(&other_ok, 1, MPI_INT, 0, 1000, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
    tap_ok_local(ok && other_ok,
                 "%d windows of %d receives and %d sends of 8 bytes, "
                 "statuses ignored: MPI_SUCCESS, every handle null, every "
                 "slot intact on both ranks", ROUNDS, WINDOW, WINDOW);
    if (!ok || !other_ok)
        tap_diag("rank 1 %d, rank 0 %d; last MPI_Waitall %d", ok, other_ok,
                 rc);

    /* Rank 2's death known here: the receive from it fails. */
    rc = MPI_Recv(&byte, 1, MPI_BYTE, 2, 0, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE);
    if (tap_class(rc) != MPIX_ERR_PROC_FAILED)
        tap_diag("the receive from the dead rank: class %d", tap_class(rc));
    {
        MPI_Request dead = MPI_REQUEST_NULL;
        int cls;

        MPI_Isend(&byte, 1, MPI_BYTE, 2, 0, MPI_COMM_WORLD, &dead);
        ok = window(rank, ROUNDS, dead, &rc);
        cls = tap_class(rc);
        MPI_Recv(&other_ok, 1, MPI_INT, 0, 1001, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        tap_ok_local(dead != MPI_REQUEST_NULL &&
                     (cls == MPI_ERR_IN_STATUS ||
                      cls == MPIX_ERR_PROC_FAILED) && ok && other_ok,
                     "with a send to the dead rank in the set: "
                     "MPI_Waitall fails, the live exchange's handles are "
                     "null and its data arrived on both ranks");
        if (!ok || !other_ok || (cls != MPI_ERR_IN_STATUS &&
                                 cls != MPIX_ERR_PROC_FAILED))
            tap_diag("class %d, rank 1 %d, rank 0 %d", cls, ok, other_ok);
    }
    MPI_Finalize();
    return tap_status();
}
