/* ftw-test: np=3 mode=ftwrap timeout=40 expect-failed=1 fate=1:signal:KILL env=FTW_RNDV_THRESHOLD=64k env=FTW_RNDV_CHUNK=1m env=FTW_INJECT=rank=1,at=pulled:3 env=FTW_XPORT=cma */
/*
 * rndv_fail_sender - a sender killed while its receiver pulls.
 *
 * Rank 1 sends 64 MiB to rank 0; fault injection (pulled:3) has rank 0
 * SIGKILL rank 1 before the third 1 MiB chunk of its pull.  Asserts:
 *  - rank 0's MPI_Recv returns FTW_ERR_PROC_FAIL_STOP (never an abort),
 *    within 5 s;
 *  - afterwards rank 2 sends rank 0 a 4 MiB + 5 rendezvous message and an
 *    eager one, both delivered intact (checksums), so the survivors go on;
 *  - MPI_Finalize returns on the survivors (the test exits 0 there).
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
    int rank, cls = -1, rc;
    double t0, dt = 0;

    rank = ks_start(&argc, &argv, buf);
    if (rank == 1)
        return ks_victim(buf, BIG, "pull");
    if (rank == 2)
        return ks_bystander(buf, NEXT);
    tap_plan(4);
    t0 = MPI_Wtime();
    rc = MPI_Recv(buf, (int)BIG, MPI_BYTE, 1, KS_TAG_VICTIM, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE);
    dt = MPI_Wtime() - t0;
    MPI_Error_class(rc, &cls);
    tap_ok_local(cls == FTW_ERR_PROC_FAIL_STOP, "receive from a sender "
                 "killed mid-pull: FTW_ERR_PROC_FAIL_STOP (class %d)", cls);
    tap_ok_local(dt < 5.0, "... within 5 s (%.3f s)", dt);
    tap_ok_local(ks_bystander_intact(buf, BIG, NEXT), "a later rendezvous "
                 "and eager message from rank 2 arrive intact");
    tap_ok_local(ks_bystander_verdict(), "rank 2's sends succeeded");
    free(buf);
    MPI_Finalize();
    return tap_status();
}
