/* ftw-test: np=3 mode=ftwrap timeout=60 link=ftwrap expect-failed=1 fate=1:signal:KILL env=FTW_RNDV_THRESHOLD=0 env=UCX_TLS=all */
/*
 * quarantine_cma - a sender killed during a large transfer over the MPI's
 * single-copy (CMA) path: never a hang or an abort, never silently wrong
 * data.
 * (The MPI carries the message: FTW_RNDV_THRESHOLD=0 keeps ftwrap's own
 * rendezvous, whose pulls end with the call, out of it.)
 *
 * Rank 1 fills 256 MiB with a pattern and sends it to rank 0; rank 2
 * SIGKILLs rank 1 10 ms into the transfer.  With single copy on (Open
 * MPI's default, unlike tests/quarantine.c) the receiver reads the
 * sender's memory itself, in one call that can finish although the
 * sender was killed (the kernel keeps a dying process's memory for a
 * reader that holds it).  So MPI_Recv may legitimately succeed; what
 * must hold is: it returns within 10 s; if it succeeded, the data is
 * the sender's, byte for byte (checksum), and the buffer is not
 * quarantined; if it failed, the class is FTW_ERR_BUFFER_UNUSABLE (the
 * transfer was cut) or FTW_ERR_PROC_FAIL_STOP (nothing had matched
 * yet), and a quarantined range is released once the sender has exited.
 * Either way the buffer no longer changes afterwards, and a later
 * receive from rank 2 works (checksum).
 *
 * On MPICH, UCX_TLS=all pins UCX's default transports, CMA among them
 * (what ftwrun keeps, unless UCX_TLS is set).  UCX reads the
 * message in 512 KiB pieces; the reads after the kill fail, which made
 * UCX 1.13 abort the receiver until ftwrap cut them (buf/cut.h): the
 * receive now ends with FTW_ERR_PROC_FAIL_STOP, not quarantined, since
 * nothing can write the buffer any more.
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ftwrap.h"
#include "qcheck.h"
#include "tap.h"

#define BIG ((size_t)256 << 20)
#define SMALL 256    /* eager on every transport */
#define SEED_BIG 5
#define SEED_SMALL 77

/* Rank 0's checks of the outcome of the cut receive (rc). */
static void check_outcome(char *big, int rc, double dt)
{
    int cls = q_class_of(rc), flag = -1, released = 0;

    tap_diag("the receive ended with class %d after %.3f s", cls, dt);
    tap_ok_local(dt < 10, "it returned within 10 s");
    tap_ok_local(rc == MPI_SUCCESS ? tap_check(big, BIG, SEED_BIG)
                                   : (cls == FTW_ERR_BUFFER_UNUSABLE ||
                                      cls == FTW_ERR_PROC_FAIL_STOP),
                 "success with the sender's data intact, or "
                 "FTW_ERR_BUFFER_UNUSABLE / FTW_ERR_PROC_FAIL_STOP");
    FTW_Buffer_quarantined(big, (MPI_Aint)BIG, &flag);
    tap_ok_local(flag == (cls == FTW_ERR_BUFFER_UNUSABLE),
                 "the buffer is quarantined exactly when the receive said "
                 "so (%d)", flag);
    if (flag == 1)
        FTW_Buffer_wait_release(big, (MPI_Aint)BIG, 10, &released);
    tap_ok_local(flag != 1 || released == 1,
                 "a quarantined range is released once the sender exited");
    tap_ok_local(q_stable(big, BIG), "the buffer no longer changes");
}

int main(int argc, char **argv)
{
    int rank, pids[3], rc;
    char *big, small[SMALL];
    double t0;

    big = q_start(&argc, &argv, &rank, pids, BIG);
    if (rank == 1)
        tap_fill(big, BIG, SEED_BIG);
    else if (rank == 2)
        tap_fill(small, SMALL, SEED_SMALL);
    MPI_Barrier(MPI_COMM_WORLD);

    if (rank == 1) {
        MPI_Send(big, (int)BIG, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
        pause();                        /* killed before or after */
    }
    if (rank == 2)
        return q_killer(small, SMALL, pids[1]);

    tap_plan(6);
    t0 = MPI_Wtime();
    rc = MPI_Recv(big, (int)BIG, MPI_BYTE, 1, 1, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE);
    check_outcome(big, rc, MPI_Wtime() - t0);
    return q_finish(small, SMALL, SEED_SMALL, big);
}
