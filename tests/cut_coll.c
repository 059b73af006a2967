/* ftw-test: np=3 mode=ftwrap timeout=60 link=ftwrap expect-failed=1 fate=1:signal:KILL env=UCX_TLS=all env=FTW_FINALIZE_TIMEOUT=3 */
/*
 * cut_coll - a gather whose sender dies while the MPI copies its data
 * with process_vm_readv: never an abort, never success with data that
 * never came.
 *
 * Ranks 0 and 1 share a communicator; rank 1 sends 256 MiB of a pattern
 * to rank 0 in an MPI_Gatherv (rank 0 gives nothing), and rank 2 (outside
 * it) SIGKILLs rank 1 10 ms in.  On MPICH (UCX_TLS=all: UCX's default
 * transports, CMA among them) rank 0 reads the data in 512 KiB pieces;
 * the reads after the kill fail, UCX 1.13 would abort, and ftwrap cuts
 * them instead (buf/cut.h), so the native gather completes with the rest
 * of the buffer never written: ftwrap must fail it.  On Open MPI (single
 * copy on) the message is read in one call.
 *
 * Rank 0 checks: the gather returns within 10 s; it succeeded with rank
 * 1's data intact (checksum) or failed with FTW_ERR_PROC_FAIL_STOP; the
 * buffer is quarantined only if it failed, and then a receive into it is
 * refused; the buffer no longer changes; a later receive from rank 2
 * works (checksum).
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
#define SMALL 256
#define SEED_BIG 9
#define SEED_SMALL 78

int main(int argc, char **argv)
{
    int rank, pids[3], rc, cls, flag = -1;
    int counts[2] = { 0, (int)BIG }, displs[2] = { 0, 0 };
    char *big, small[SMALL];
    MPI_Comm pair;
    double t0, dt;

    big = q_start(&argc, &argv, &rank, pids, BIG);
    MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : MPI_UNDEFINED, rank,
                   &pair);
    if (rank == 1)
        tap_fill(big, BIG, SEED_BIG);
    else if (rank == 2)
        tap_fill(small, SMALL, SEED_SMALL);
    MPI_Barrier(MPI_COMM_WORLD);

    if (rank == 1) {
        MPI_Gatherv(big, (int)BIG, MPI_BYTE, NULL, NULL, NULL, MPI_BYTE, 0,
                    pair);
        pause();                        /* killed before or after */
    }
    if (rank == 2)
        return q_killer(small, SMALL, pids[1]);

    tap_plan(6);
    MPI_Comm_set_errhandler(pair, MPI_ERRORS_RETURN);
    t0 = MPI_Wtime();
    rc = MPI_Gatherv(small, 0, MPI_BYTE, big, counts, displs, MPI_BYTE, 0,
                     pair);
    dt = MPI_Wtime() - t0;
    cls = q_class_of(rc);
    tap_diag("the gather ended with class %d after %.3f s", cls, dt);
    tap_ok_local(dt < 10, "it returned within 10 s");
    tap_ok_local(rc == MPI_SUCCESS ? tap_check(big, BIG, SEED_BIG)
                                   : cls == FTW_ERR_PROC_FAIL_STOP,
                 "success with rank 1's data intact, or "
                 "FTW_ERR_PROC_FAIL_STOP");
    FTW_Buffer_quarantined(big, (MPI_Aint)BIG, &flag);
    tap_ok_local(flag == 0 || rc != MPI_SUCCESS,
                 "the buffer is quarantined only if the gather failed (%d)",
                 flag);
    rc = flag == 1 ? MPI_Recv(big, 16, MPI_BYTE, 2, 3, MPI_COMM_WORLD,
                              MPI_STATUS_IGNORE)
                   : FTW_ERR_BUFFER_UNUSABLE;
    tap_ok_local(q_class_of(rc) == FTW_ERR_BUFFER_UNUSABLE,
                 "a quarantined buffer refuses a receive");
    tap_ok_local(q_stable(big, BIG), "the buffer no longer changes");
    return q_finish(small, SMALL, SEED_SMALL, big);
}
