/* ftw-test: np=4 mode=ftwrap timeout=60 link=ftwrap expect-failed=3 fate=3:signal:KILL */
/*
 * inter_shrink - MPIX_Comm_shrink of an intercommunicator, as the ULFM
 * chapter defines it: an intercommunicator of both groups' survivors.
 *
 * The even and the odd ranks of MPI_COMM_WORLD are joined by
 * MPI_Intercomm_create; world rank VICTIM (3 here, rank 1 of the odd
 * group; inter_shrink_even.c sets 2, rank 1 of the even group, whose
 * lowest world rank goes first in the agreement) is SIGKILLed.  The
 * survivors shrink the intercommunicator:
 *   - the full group (not the victim's) gets local size 2 and remote size
 *     1, the short group local size 1 and remote size 2, ranks in order;
 *   - MPI_Allreduce over it gives each group the other group's sum of
 *     (world rank + 1);
 *   - every survivor of the full group sends a checksummed 64 KiB block
 *     to remote rank 0, which receives both and sends each one back;
 *   - the shrunken intercommunicator is freed; so is the old one.
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "ftwrap.h"
#include "tap.h"

#ifndef VICTIM
#define VICTIM 3
#endif
#define SHORT (VICTIM % 2)      /* the victim's group */
#define FULL (1 - SHORT)
#define LEN 65536

int main(int argc, char **argv)
{
    MPI_Comm local, ic, nic = MPI_COMM_NULL, v;
    MPI_Group failed;
    char *buf = malloc(LEN);
    int wrank, rc, lsize = -1, rsize = -1, lrank = -1, val, sum = -1, ok;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_dup(MPI_COMM_WORLD, &v);
    MPI_Comm_set_errhandler(v, MPI_ERRORS_RETURN);
    MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &local);
    MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, wrank % 2 ? 0 : 1, 7,
                         &ic);
    MPI_Comm_set_errhandler(ic, MPI_ERRORS_RETURN);
    MPI_Barrier(v);
    if (wrank == VICTIM)
        raise(SIGKILL);

    rc = MPIX_Comm_shrink(ic, &nic);
    if (rc == MPI_SUCCESS) {
        MPI_Comm_size(nic, &lsize);
        MPI_Comm_remote_size(nic, &rsize);
        MPI_Comm_rank(nic, &lrank);
    } else {
        tap_diag("MPIX_Comm_shrink: class %d", tap_class(rc));
    }
    if (FTW_Comm_validate(v, &failed) != MPI_SUCCESS)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Group_free(&failed);
    tap_plan(3);
    ok = rc == MPI_SUCCESS &&
         (wrank % 2 == FULL ? lsize == 2 && rsize == 1 &&
                              lrank == wrank / 2
                            : lsize == 1 && rsize == 2 && lrank == 0);
    tap_ok_comm(v, ok, "MPIX_Comm_shrink of an intercommunicator gives both "
                "groups' survivors, in order");
    if (!ok)
        MPI_Abort(MPI_COMM_WORLD, 1);

    val = wrank + 1;
    rc = MPI_Allreduce(&val, &sum, 1, MPI_INT, MPI_SUM, nic);
    tap_ok_comm(v, rc == MPI_SUCCESS &&
                sum == (wrank % 2 == FULL ? SHORT + 1
                                          : FULL + 1 + FULL + 3),
                "MPI_Allreduce over it gives each group the other's sum");

    ok = 1;
    if (wrank % 2 == FULL) {
        tap_fill(buf, LEN, 700 + wrank);
        rc = MPI_Send(buf, LEN, MPI_BYTE, 0, 9, nic);
        memset(buf, 0, LEN);
        rc |= MPI_Recv(buf, LEN, MPI_BYTE, 0, 10, nic, MPI_STATUS_IGNORE);
        ok = rc == MPI_SUCCESS && tap_check(buf, LEN, 700 + wrank);
    } else {
        for (int i = 0; i < 2; i++) {
            MPI_Status st;

            rc = MPI_Recv(buf, LEN, MPI_BYTE, MPI_ANY_SOURCE, 9, nic, &st);
            ok = ok && rc == MPI_SUCCESS &&
                 tap_check(buf, LEN, 700 + 2 * st.MPI_SOURCE + FULL);
            rc = MPI_Send(buf, LEN, MPI_BYTE, st.MPI_SOURCE, 10, nic);
            ok = ok && rc == MPI_SUCCESS;
        }
    }
    tap_ok_comm(v, ok, "checksummed 64 KiB blocks cross it both ways");
    MPI_Comm_free(&nic);
    MPI_Comm_free(&ic);
    MPI_Comm_free(&local);
    MPI_Comm_free(&v);
    free(buf);
    MPI_Finalize();
    return tap_status();
}
