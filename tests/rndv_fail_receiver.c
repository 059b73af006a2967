/* ftw-test: np=3 mode=ftwrap timeout=40 expect-failed=1 fate=1:signal:KILL env=FTW_RNDV_THRESHOLD=64k env=FTW_RNDV_CHUNK=1m env=FTW_INJECT=rank=1,at=pull:3 env=FTW_XPORT=cma */
/*
 * rndv_fail_receiver - a receiver killed in the middle of its pull.
 *
 * Rank 0 sends 64 MiB to rank 1 with MPI_Isend + MPI_Wait; fault
 * injection (pull:3) kills rank 1 before the third 1 MiB chunk of its
 * pull.  Asserts:
 *  - rank 0's MPI_Wait returns FTW_ERR_PROC_FAIL_STOP within 5 s and the
 *    request is freed;
 *  - a blocking 64 MiB MPI_Send to rank 1 afterwards fails at once with
 *    FTW_ERR_PROC_FAIL_STOP;
 *  - rank 0 then sends rank 2 a 4 MiB + 5 rendezvous message that arrives
 *    intact (checksum checked by rank 2, verdict sent back);
 *  - MPI_Finalize returns on the survivors.
 */
#include "tap.h"

#include <stdlib.h>

#include "ftwrap.h"
#include "killed_sender.h"

#define BIG ((size_t)64 << 20)
#define NEXT ((size_t)(4 << 20) + 5)

int main(int argc, char **argv)
{
    unsigned char *buf = malloc(BIG);
    int rank, ok2 = 0, rc;
    MPI_Request req;
    double t0, dt;

    rank = ks_start(&argc, &argv, buf);
    if (rank == 1) {
        MPI_Recv(buf, (int)BIG, MPI_BYTE, 0, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        tap_diag("rank 1 survived its pull");
        MPI_Finalize();
        return 1;
    }
    if (rank == 2) {
        rc = MPI_Recv(buf, (int)BIG, MPI_BYTE, 0, 2, MPI_COMM_WORLD,
                      MPI_STATUS_IGNORE);
        ok2 = rc == MPI_SUCCESS && tap_check(buf, NEXT, 33);
        MPI_Send(&ok2, 1, MPI_INT, 0, 3, MPI_COMM_WORLD);
        MPI_Finalize();
        return ok2 ? 0 : 1;
    }
    tap_plan(5);
    tap_fill(buf, BIG, 33);
    t0 = MPI_Wtime();
    rc = MPI_Isend(buf, (int)BIG, MPI_BYTE, 1, 1, MPI_COMM_WORLD, &req);
    if (rc == MPI_SUCCESS)
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    dt = MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS ?
         MPI_Wtime() - t0 : 99;
    tap_ok_local(class_of(rc) == FTW_ERR_PROC_FAIL_STOP, "send to a "
                 "receiver killed mid-pull: FTW_ERR_PROC_FAIL_STOP (class "
                 "%d)", class_of(rc));
    tap_ok_local(dt < 5.0 && req == MPI_REQUEST_NULL, "... within 5 s "
                 "(%.3f s), request freed", dt);
    rc = MPI_Send(buf, (int)BIG, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
    tap_ok_local(class_of(rc) == FTW_ERR_PROC_FAIL_STOP, "a later send to "
                 "it fails at once");
    rc = MPI_Send(buf, (int)NEXT, MPI_BYTE, 2, 2, MPI_COMM_WORLD);
    tap_ok_local(rc == MPI_SUCCESS, "rendezvous send to rank 2 succeeds");
    MPI_Recv(&ok2, 1, MPI_INT, 2, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    tap_ok_local(ok2, "rank 2 got it intact");
    free(buf);
    MPI_Finalize();
    return tap_status();
}
