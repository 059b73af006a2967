/* ftw-test: np=4 mode=ftwrap timeout=20 expect-abort="rank 3 of the communicator \(world rank 3\) failed" */
/*
 * fail_fatal - MPI_ERRORS_ARE_FATAL and a failed peer: the job aborts.
 *
 * MPI_COMM_WORLD keeps its default handler, MPI_ERRORS_ARE_FATAL.  Rank 3
 * leaves a barrier, sleeps 200 ms and SIGKILLs itself while rank 0 is
 * blocked in MPI_Recv from it.  Ranks 1 and 2 are busy outside MPI (they
 * sleep, for at most 8 s), as an application's other processes would be
 * computing: nothing but the abort can end them early, not even their own
 * failure detection.
 *
 * The failure must abort the whole job: the runner (expect-abort) checks
 * that the launcher exits nonzero before the timeout, that stderr says
 * "rank 3 of the communicator (world rank 3) failed", and that no process
 * or /dev/shm file is left behind.  Rank 0 prints its TAP lines before it
 * blocks; should MPI_Recv return, it prints "not ok" and exits 1.  Ranks 1
 * and 2, if still running after their 8 s, print "not ok" (TAP lines past
 * the plan, so prove fails the test) and exit 1.
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ftwrap.h"
#include "tap.h"

#define NP 4
#define VICTIM 3
#define KILL_DELAY_US 200000
#define TAG_DEAD 10 /* never sent */
#define BUSY_SECONDS 8

int main(int argc, char **argv)
{
    MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
    int rank, size, rc, cls = -1, buf = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != NP) {
        if (rank == 0)
            printf("1..0 # SKIP needs %d ranks\n", NP);
        MPI_Finalize();
        return 0;
    }
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh);
    tap_plan(1);
    tap_ok(eh == MPI_ERRORS_ARE_FATAL,
           "MPI_COMM_WORLD's handler is MPI_ERRORS_ARE_FATAL; rank 0 now "
           "blocks in MPI_Recv from rank 3, which dies (the runner checks "
           "that the job aborts)");
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);

    if (rank == VICTIM) {
        fflush(stderr);
        usleep(KILL_DELAY_US);
        raise(SIGKILL);
        _exit(99); /* not reached */
    }
    if (rank != 0) {
        /* "Computing": only the abort ends this early. */
        for (int i = 0; i < BUSY_SECONDS * 100; i++)
            usleep(10000);
        printf("not ok %d - rank %d still running %d s after rank 3's "
               "failure: the job did not abort\n", 1 + rank, rank,
               BUSY_SECONDS);
        fflush(stdout);
        _exit(1);
    }

    rc = MPI_Recv(&buf, 1, MPI_INT, VICTIM, TAG_DEAD, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE);
    MPI_Error_class(rc, &cls);
    tap_ok_local(0, "MPI_Recv from dead rank 3 returned (code %d, class %d) "
                 "under MPI_ERRORS_ARE_FATAL instead of aborting", rc, cls);
    fflush(stdout);
    _exit(1);
}
