/* ftw-test: np=3 mode=ftwrap timeout=60 link=ftwrap expect-failed=2 fate=2:signal:KILL mpi=openmpi */
/*
 * ulfm_agree_spawn - MPIX_Comm_agree over an intercommunicator whose
 * groups are two jobs, the respawn pattern of ULFM programs (tutorial
 * 10.respawn): a job that lost a process spawns a replacement and both
 * sides agree that the spawn worked before merging.
 *
 * Three ranks; rank 2 SIGKILLs itself.  Ranks 0-1 (MPI_ERRORS_RETURN on a
 * duplicate of MPI_COMM_WORLD) see the failure, shrink to s, and spawn
 * one process of this program over s.  Then on the intercommunicator ic:
 * the parents propose 0xff minus bit (rank + 1), the child 0x7e; ULFM's
 * rule gives each group the AND of the other group's flags: the parents
 * get 0x7e, the child 0xf9 (0xff minus bits 1 and 2).  Then
 * MPI_Intercomm_merge(ic) gives a communicator of 3 on which a checksummed
 * 64 KiB MPI_Bcast from the child and an MPI_Allreduce work.
 * (mpi=openmpi: Debian's MPICH 4.0.2 fails MPI_Comm_spawn without ftwrap
 * too.)
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftwrap.h"
#include "tap.h"

#define LEN 65536

/* Both sides: agree on ic, merge, use the merged communicator.  Checks
 * are printed by the parents' rank 0 (TAP over the merged one). */
static void joined(MPI_Comm ic, int child, int rank)
{
    int flag = child ? 0x7e : 0xff & ~(1 << (rank + 1));
    int want = child ? 0xf9 : 0x7e, rc, ok, sum = -1, mrank = -1, msize = 0;
    char *big = malloc(LEN);
    MPI_Comm m = MPI_COMM_NULL;

    rc = MPIX_Comm_agree(ic, &flag);
    ok = rc == MPI_SUCCESS && flag == want;
    if (!ok)
        tap_diag("MPIX_Comm_agree(ic): rc %d, flag 0x%x (want 0x%x)", rc,
                 flag, want);
    rc = MPI_Intercomm_merge(ic, child, &m);
    if (rc == MPI_SUCCESS) {
        MPI_Comm_rank(m, &mrank);
        MPI_Comm_size(m, &msize);
    }
    tap_ok_comm(m, ok, "MPIX_Comm_agree over the spawn's intercommunicator: "
                "each group gets the AND of the other group's flags");
    tap_ok_comm(m, rc == MPI_SUCCESS && msize == 3 && mrank == (child ? 2 :
                                                                 rank),
                "MPI_Intercomm_merge gives 3 ranks, the child last");
    if (child)
        tap_fill(big, LEN, 1234);
    else
        memset(big, 0, LEN);
    rc = MPI_Bcast(big, LEN, MPI_BYTE, 2, m);
    tap_ok_comm(m, rc == MPI_SUCCESS && tap_check(big, LEN, 1234),
                "a checksummed 64 KiB MPI_Bcast from the child arrives "
                "intact");
    rc = MPI_Allreduce(&mrank, &sum, 1, MPI_INT, MPI_SUM, m);
    tap_ok_comm(m, rc == MPI_SUCCESS && sum == 0 + 1 + 2,
                "MPI_Allreduce over the merged communicator");
    free(big);
    MPI_Comm_free(&m);
}

int main(int argc, char **argv)
{
    MPI_Comm parent, w, s = MPI_COMM_NULL, ic = MPI_COMM_NULL;
    int rank, buf = 0, rc;

    MPI_Init(&argc, &argv);
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL) {
        /* The child's verdicts go into the parents' lines (tap_ok_comm
         * over the merged communicator); it prints none of its own. */
        tap_rank_ = 1;
        MPI_Comm_set_errhandler(parent, MPI_ERRORS_RETURN);
        joined(parent, 1, 0);
        MPI_Comm_free(&parent);
        MPI_Finalize();
        return tap_status();
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_dup(MPI_COMM_WORLD, &w);
    MPI_Comm_set_errhandler(w, MPI_ERRORS_RETURN);
    MPI_Barrier(w);
    if (rank == 2)
        raise(SIGKILL);
    tap_plan(5);
    rc = MPI_Recv(&buf, 1, MPI_INT, 2, 0, w, MPI_STATUS_IGNORE);
    tap_ok_local(rc != MPI_SUCCESS, "MPI_Recv from the dead rank fails");
    MPIX_Comm_shrink(w, &s);
    rc = MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, s, &ic,
                        MPI_ERRCODES_IGNORE);
    if (rc != MPI_SUCCESS) {
        tap_diag("MPI_Comm_spawn: %d", rc);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Comm_set_errhandler(ic, MPI_ERRORS_RETURN);
    joined(ic, 0, rank);
    MPI_Comm_free(&ic);
    MPI_Comm_free(&s);
    MPI_Comm_free(&w);
    MPI_Finalize();
    return tap_status();
}
