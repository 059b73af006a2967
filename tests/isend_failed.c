/* ftw-test: np=3 mode=ftwrap timeout=60 link=ftwrap expect-failed=2 fate=2:signal:KILL */
/*
 * isend_failed - a nonblocking send to a process known failed starts
 * (MPI_SUCCESS, a real request) and completes in error, as in ULFM's MPI,
 * so the sends a halo exchange posts after it still go out.
 *
 * Three ranks; rank 2 SIGKILLs itself.  Rank 1 learns of it (a receive
 * from 2 fails), then runs one round of a halo exchange with neighbours
 * 0 and 2: receives from 0 and 2, a send to 2, then a send to 0, and
 * MPI_Waitall.  1: MPI_Isend to rank 2 returns MPI_SUCCESS and a request.
 * 2: MPI_Waitall returns MPI_ERR_IN_STATUS; the send to 2 and the receive
 * from 2 end with MPIX_ERR_PROC_FAILED, the exchange with 0 succeeds, and
 * 4 KiB from rank 0 arrive intact.  3: rank 0 gets rank 1's 4 KiB intact
 * (the send posted after the one to the dead rank went out).  4: a
 * blocking MPI_Send to rank 2 still fails at once.  5: MPI_Wait and
 * MPI_Test end such sends in error; MPI_Request_free takes one.
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <stdio.h>
#include <stdlib.h>

#include "ftwrap.h"
#include "tap.h"

#define LEN 4096

int main(int argc, char **argv)
{
    char out[LEN], in0[LEN], in2[LEN];
    int rank, rc, ok;
    MPI_Request req[4];
    MPI_Status st[4];

    MPI_Init(&argc, &argv);
    if (!tap_need_victim(3, 2, &rank))
        return 0;
    tap_fill(out, LEN, (uint64_t)rank + 1);
    if (rank == 0) {
        tap_rank_ = 1;
        rc = MPI_Sendrecv(out, LEN, MPI_BYTE, 1, 5, in0, LEN, MPI_BYTE, 1, 5,
                          MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        ok = rc == MPI_SUCCESS && tap_check(in0, LEN, 2);
        MPI_Send(&ok, 1, MPI_INT, 1, 6, MPI_COMM_WORLD);
        MPI_Finalize();
        return 0;
    }
    /* Rank 1 prints the verdicts. */
    tap_rank_ = 0;
    tap_plan(5);
    rc = MPI_Recv(in2, LEN, MPI_BYTE, 2, 5, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE);
    if (tap_class(rc) != MPIX_ERR_PROC_FAILED)
        tap_diag("the receive from the dead rank: class %d", tap_class(rc));
    MPI_Irecv(in0, LEN, MPI_BYTE, 0, 5, MPI_COMM_WORLD, &req[0]);
    MPI_Irecv(in2, LEN, MPI_BYTE, 2, 5, MPI_COMM_WORLD, &req[1]);
    rc = MPI_Isend(out, LEN, MPI_BYTE, 2, 5, MPI_COMM_WORLD, &req[2]);
    tap_ok_local(rc == MPI_SUCCESS && req[2] != MPI_REQUEST_NULL,
                 "MPI_Isend to a process known failed starts: "
                 "MPI_SUCCESS and a request");
    MPI_Isend(out, LEN, MPI_BYTE, 0, 5, MPI_COMM_WORLD, &req[3]);
    rc = MPI_Waitall(4, req, st);
    tap_ok_local(rc == MPI_ERR_IN_STATUS &&
                 tap_class(st[2].MPI_ERROR) == MPIX_ERR_PROC_FAILED &&
                 tap_class(st[1].MPI_ERROR) == MPIX_ERR_PROC_FAILED &&
                 st[0].MPI_ERROR == MPI_SUCCESS &&
                 st[3].MPI_ERROR == MPI_SUCCESS &&
                 tap_check(in0, LEN, 1),
                 "MPI_Waitall: the send to and the receive from the dead "
                 "rank fail, the exchange with the live one succeeds "
                 "(checksum)");
    if (rc != MPI_ERR_IN_STATUS || st[0].MPI_ERROR || st[3].MPI_ERROR)
        tap_diag("MPI_Waitall: %d; statuses %d %d %d %d", rc, st[0].MPI_ERROR,
                 st[1].MPI_ERROR, st[2].MPI_ERROR, st[3].MPI_ERROR);
    MPI_Recv(&ok, 1, MPI_INT, 0, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    tap_ok_local(ok, "the live neighbour got the send posted after the "
                 "one to the dead rank (checksum)");
    rc = MPI_Send(out, LEN, MPI_BYTE, 2, 5, MPI_COMM_WORLD);
    tap_ok_local(tap_class(rc) == MPIX_ERR_PROC_FAILED,
                 "a blocking MPI_Send to the dead rank still fails");
    {
        int flag = 0, rc2, rc3;

        MPI_Isend(out, LEN, MPI_BYTE, 2, 5, MPI_COMM_WORLD, &req[0]);
        rc = MPI_Wait(&req[0], &st[0]);
        MPI_Issend(out, LEN, MPI_BYTE, 2, 5, MPI_COMM_WORLD, &req[1]);
        rc2 = MPI_Test(&req[1], &flag, &st[1]);
        MPI_Isend(out, LEN, MPI_BYTE, 2, 5, MPI_COMM_WORLD, &req[2]);
        rc3 = MPI_Request_free(&req[2]);
        tap_ok_local(tap_class(rc) == MPIX_ERR_PROC_FAILED &&
                     req[0] == MPI_REQUEST_NULL &&
                     tap_class(rc2) == MPIX_ERR_PROC_FAILED && flag &&
                     req[1] == MPI_REQUEST_NULL && rc3 == MPI_SUCCESS,
                     "MPI_Wait and MPI_Test end such sends with "
                     "MPIX_ERR_PROC_FAILED; MPI_Request_free takes one");
    }
    MPI_Finalize();
    return tap_status();
}
