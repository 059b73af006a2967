/* ftw-test: np=4 mode=ftwrap timeout=40 expect-failed=3 fate=3:signal:KILL env=FTW_FINALIZE_TIMEOUT=2 */
/*
 * fail_finalize_full - MPI_Finalize after a failure returns even when the
 * survivors' barrier cannot send to its coordinator: the coordinator's
 * queue is full, as a queue a dying writer left stuck stays.
 *
 * Rank 3 dies; every survivor learns it from a receive.  Rank 0, the
 * lowest live rank and so the coordinator of MPI_Finalize's barrier,
 * stops itself (SIGSTOP).  Rank 2 then posts NMSG MPI_Isend of 8 bytes to
 * it, more than its shared-memory queue holds (both MPIs then keep the
 * rest, and any later small send to it, waiting), and tells rank 1, which
 * calls MPI_Finalize: on MPICH its arrival at the barrier cannot be
 * delivered and waits behind rank 2's messages (before, for good); Open
 * MPI takes the arrival in, and then rank 1 waits for the release that
 * the stopped rank 0 cannot send.
 *
 * 1: rank 1's MPI_Finalize returns within FTW_FINALIZE_TIMEOUT (2 s) and
 *    a margin, while rank 0 is still stopped (a blocking send of the
 *    arrival waits for good).  Rank 1 then resumes rank 0 (SIGCONT).
 * 2: rank 0 then receives rank 2's NMSG messages, every byte intact, and
 *    every survivor's MPI_Finalize returns (exit 0, checked by the
 *    harness).
 */
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tap.h"

#define NMSG 400
#define MARGIN 8.0

/* Whether process pid is stopped. */
static int stopped(int pid)
{
    return tap_proc_state(pid) == 'T';
}

int main(int argc, char **argv)
{
    int rank, pids[4], me, word = 0, cls;
    uint64_t msgs[NMSG];

    MPI_Init(&argc, &argv);
    if (!tap_need_size(4))
        return 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    me = (int)getpid();
    MPI_Allgather(&me, 1, MPI_INT, pids, 1, MPI_INT, MPI_COMM_WORLD);
    if (rank == 3)
        raise(SIGKILL);
    cls = class_of(MPI_Recv(&word, 1, MPI_INT, 3, 0, MPI_COMM_WORLD,
                             MPI_STATUS_IGNORE));
    if (cls != FTW_ERR_PROC_FAIL_STOP)
        tap_diag("rank %d: the receive from rank 3 gave class %d", rank,
                 cls);
    if (rank == 0) {
        int bad = 0;

        raise(SIGSTOP);
        for (int i = 0; i < NMSG; i++) {
            uint64_t v = 0;

            MPI_Recv(&v, 1, MPI_UINT64_T, 2, 7, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            bad += v != 0x5eed0000u + (uint64_t)i;
        }
        printf("%s 2 - the %d messages queued while the coordinator was "
               "stopped arrive intact (%d wrong)\n", bad ? "not ok" : "ok",
               NMSG, bad);
        fflush(stdout);
        MPI_Finalize();
        return 0;
    }
    while (!stopped(pids[0]))
        usleep(1000);
    if (rank == 2) {
        static MPI_Request req[NMSG];
        static MPI_Status st[NMSG];

        for (int i = 0; i < NMSG; i++) {
            msgs[i] = 0x5eed0000u + (uint64_t)i;
            MPI_Isend(&msgs[i], 1, MPI_UINT64_T, 0, 7, MPI_COMM_WORLD,
                      &req[i]);
        }
        MPI_Send(&word, 1, MPI_INT, 1, 8, MPI_COMM_WORLD);
        while (stopped(pids[0]))
            usleep(1000);
        MPI_Waitall(NMSG, req, st);
        MPI_Finalize();
        return 0;
    }
    /* rank 1 */
    MPI_Recv(&word, 1, MPI_INT, 2, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    double t0 = tap_now(), took;
    int still;

    MPI_Finalize();
    took = tap_now() - t0;
    still = stopped(pids[0]);
    printf("1..2\n%s 1 - MPI_Finalize returned in %.1f s while the "
           "coordinator's queue was full (bound %.0f s; coordinator still "
           "stopped: %s)\n", took < 2.0 + MARGIN && still ? "ok" : "not ok",
           took, 2.0 + MARGIN, still ? "yes" : "no");
    fflush(stdout);
    kill(pids[0], SIGCONT);
    return 0;
}
