/* ftw-test: np=4 mode=ftwrap timeout=60 link=ftwrap expect-failed=3 fate=3:signal:KILL env=OMPI_MCA_btl_vader_single_copy_mechanism=none */
/*
 * quarantine_coll - what a collective a failure cuts may still write.
 *
 * Rank 3 starts a nonblocking broadcast of 256 MiB from buffer big2 and
 * then a blocking one of 256 MiB from big; rank 0 SIGKILLs it 10 ms into
 * the transfers.  Ranks 1 and 2 (MPI_ERRORS_RETURN) post the same two.
 * Both must end with FTW_ERR_PROC_FAIL_STOP in bounded time (or, had they
 * finished, success).  The blocking one ran over ftwrap's private copy of
 * big: big is the program's again at once, not quarantined, and a
 * checksummed receive into it works and stays intact through 300 ms of
 * progress (the MPI keeps writing only the copy).  The nonblocking one
 * wrote big2 itself: big2 is quarantined (FTW_Buffer_quarantined), and
 * both a receive and a collective into it fail with
 * FTW_ERR_BUFFER_UNUSABLE.  A receive elsewhere works (checksummed).
 * Runs on both MPIs: on MPICH the stall quarantine.c describes was not
 * seen here (20 runs of 20 passed).
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
#define NV 7

int main(int argc, char **argv)
{
    int rank, pids[4], rc, verdict[2][NV] = {{0}}, v[NV], all = 1;
    char *big, *big2, small[SMALL];
    double t0, dt;
    MPI_Request req;

    big = q_start(&argc, &argv, &rank, pids, BIG);
    big2 = malloc(BIG);
    if (big2 == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    MPI_Barrier(MPI_COMM_WORLD);

    if (rank == 3) {
        MPI_Ibcast(big2, (int)BIG, MPI_BYTE, 3, MPI_COMM_WORLD, &req);
        MPI_Bcast(big, (int)BIG, MPI_BYTE, 3, MPI_COMM_WORLD);
        pause();                        /* killed before it ends */
    }
    if (rank == 0) {
        usleep(10000);
        kill(pids[3], SIGKILL);
        for (int r = 1; r <= 2; r++) {
            tap_fill(small, SMALL, (uint64_t)r);
            MPI_Send(small, 16, MPI_BYTE, r, 7, MPI_COMM_WORLD);
            MPI_Send(small, SMALL, MPI_BYTE, r, 7, MPI_COMM_WORLD);
        }
        for (int r = 1; r <= 2; r++)
            MPI_Recv(verdict[r - 1], NV, MPI_INT, r, 8, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        tap_plan(2 * NV);
        for (int r = 1; r <= 2; r++) {
            int *w = verdict[r - 1];

            tap_ok_local(w[0], "rank %d: both broadcasts returned "
                         "FTW_ERR_PROC_FAIL_STOP in bounded time", r);
            tap_ok_local(w[1], "rank %d: the blocking one's buffer is not "
                         "quarantined (it ran over a private copy)", r);
            tap_ok_local(w[2], "rank %d: a receive into it works and stays "
                         "intact through 300 ms of progress", r);
            tap_ok_local(w[3], "rank %d: the nonblocking one's buffer is "
                         "quarantined", r);
            tap_ok_local(w[4], "rank %d: a receive into it fails with "
                         "FTW_ERR_BUFFER_UNUSABLE", r);
            tap_ok_local(w[5], "rank %d: so does a collective into it", r);
            tap_ok_local(w[6], "rank %d: a receive elsewhere works "
                         "(checksum)", r);
        }
        fflush(stdout);
        MPI_Finalize();
        return tap_status();
    }

    /* Ranks 1 and 2. */
    t0 = MPI_Wtime();
    MPI_Ibcast(big2, (int)BIG, MPI_BYTE, 3, MPI_COMM_WORLD, &req);
    rc = MPI_Bcast(big, (int)BIG, MPI_BYTE, 3, MPI_COMM_WORLD);
    all &= q_class_of(rc) == FTW_ERR_PROC_FAIL_STOP;
    rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    all &= q_class_of(rc) == FTW_ERR_PROC_FAIL_STOP;
    dt = MPI_Wtime() - t0;
    v[0] = all && dt < 10;
    FTW_Buffer_quarantined(big, (MPI_Aint)BIG, &v[1]);
    v[1] = !v[1];
    rc = MPI_Recv(big + BIG / 2, 16, MPI_BYTE, 0, 7, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE);
    v[2] = rc == MPI_SUCCESS && tap_check(big + BIG / 2, 16, (uint64_t)rank)
           && q_stable(big, BIG);
    FTW_Buffer_quarantined(big2, (MPI_Aint)BIG, &v[3]);
    rc = MPI_Recv(big2 + BIG / 2, 16, MPI_BYTE, 0, 7, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE);
    v[4] = q_class_of(rc) == FTW_ERR_BUFFER_UNUSABLE;
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    rc = MPI_Allreduce(small, big2, 1, MPI_INT, MPI_MAX, MPI_COMM_SELF);
    v[5] = q_class_of(rc) == FTW_ERR_BUFFER_UNUSABLE;
    rc = MPI_Recv(small, SMALL, MPI_BYTE, 0, 7, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE);
    v[6] = rc == MPI_SUCCESS && tap_check(small, SMALL, (uint64_t)rank);
    MPI_Send(v, NV, MPI_INT, 0, 8, MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
