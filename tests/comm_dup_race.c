/* ftw-test: np=4 mode=ftwrap timeout=40 link=ftwrap expect-failed=3 fate=3:signal:KILL */
/*
 * comm_dup_race - a member dies while MPI_Comm_dup is under way.
 *
 * Ranks 0 and 1 call MPI_Comm_dup(MPI_COMM_WORLD) at once after a barrier;
 * rank 3 SIGKILLs itself 300 ms after the barrier without calling it;
 * rank 2 calls it only once it knows of rank 3's failure (so it is
 * refused at once).  Ranks 0 and 1 are inside the MPI's duplicate when
 * rank 3 dies, waiting for ranks 2 and 3:
 *   - every survivor's MPI_Comm_dup returns FTW_ERR_PROC_FAIL_STOP within
 *     BOUND seconds and gives MPI_COMM_NULL (nowhere, the same answer for
 *     the processes inside the call and the one refused);
 *   - FTW_Comm_validate(WORLD) then gives {3} on every survivor (the three
 *     took the same number of agreements: one that skipped the
 *     duplicate's would wait for a message nobody sends);
 *   - MPI_Comm_split after it works, and a checksummed 256 KiB MPI_Bcast
 *     on the new communicator arrives intact.
 * Rank 0 prints TAP (plan at the end); the survivors end with
 * MPI_Finalize.
 *
 * Ranks 0 and 1 wait in the MPI's nonblocking duplicate when rank 3
 * dies (on Open MPI too: the abandoned one is let go so that the split
 * after the validate is not held up; tests/comm_dup_inside kills the
 * victim after ftwrap's checks).
 */
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftwrap.h"
#define MAXCHK 64            /* verdicts kept (tap.h) */
#include "tap.h"

#define NP 4
#define VICTIM 3
#define NSURV 3
#define BOUND 5.0             /* seconds a call may take after the kill */
#define AT_ONCE 1.0           /* seconds for a call that must fail at once */
#define KILL_DELAY_US 300000  /* victim: from the barrier to its death */
#define LATE 2                /* calls the creation after it knows */
#define BCAST_BYTES (256 * 1024)

/* comm_split_race.c includes this file with RACE_SPLIT defined. */
#ifdef RACE_SPLIT
#define CREATE_NAME "MPI_Comm_split"
#define CREATE(nc) MPI_Comm_split(MPI_COMM_WORLD, rank % 2, NP - rank, nc)
#else
#define CREATE_NAME "MPI_Comm_dup"
#define CREATE(nc) MPI_Comm_dup(MPI_COMM_WORLD, nc)
#endif

#include "survivors.h"

int main(int argc, char **argv)
{
    static const int surv[NSURV] = {0, 1, 2};
    MPI_Comm nc = MPI_COMM_NULL;
    MPI_Group g = MPI_GROUP_NULL;
    int rc;
    double t0;

    if (!setup(&argc, &argv))
        return 0;
    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS)
        tap_diag("barrier before the kill failed");
    if (rank == VICTIM)
        victim();
    watchdog_start(20.0);

    if (rank == LATE) {
        step = "waiting to know of the failure";
        wait_known(1 << VICTIM, BOUND);
    }
    step = CREATE_NAME " while a member dies";
    t0 = MPI_Wtime();
    rc = CREATE(&nc);
    chk_class(rc, FTW_ERR_PROC_FAIL_STOP, rank == LATE ?
              CREATE_NAME "(WORLD) called knowing of the failure" :
              CREATE_NAME "(WORLD) entered before the failure");
    chk_time(MPI_Wtime() - t0, rank == LATE ? AT_ONCE :
             BOUND + KILL_DELAY_US / 1e6, CREATE_NAME);
    chk(nc == MPI_COMM_NULL, CREATE_NAME " made no communicator");
    if (rc == MPI_SUCCESS && nc != MPI_COMM_NULL)
        MPI_Comm_free(&nc);

    step = "FTW_Comm_validate";
    t0 = MPI_Wtime();
    rc = FTW_Comm_validate(MPI_COMM_WORLD, &g);
    chk_time(MPI_Wtime() - t0, BOUND, "FTW_Comm_validate");
    chk_group3(rc, &g, "FTW_Comm_validate(WORLD) after the failed "
               CREATE_NAME);

    step = "MPI_Comm_split after validate";
    nc = MPI_COMM_NULL;
    rc = MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &nc);
    chk_class(rc, MPI_SUCCESS, "MPI_Comm_split(WORLD) after validate");
    if (rc == MPI_SUCCESS && nc != MPI_COMM_NULL) {
        unsigned char *b = malloc(BCAST_BYTES);
        int n = -1;

        MPI_Comm_set_errhandler(nc, MPI_ERRORS_RETURN);
        MPI_Comm_size(nc, &n);
        chk(n == NSURV, "split after validate: size %d (want %d)", n, NSURV);
        step = "MPI_Bcast on the split communicator";
        if (rank == 1)
            tap_fill(b, BCAST_BYTES, 31);
        else
            memset(b, 0, BCAST_BYTES);
        rc = MPI_Bcast(b, BCAST_BYTES, MPI_BYTE, 1, nc);
        chk(rc == MPI_SUCCESS && tap_check(b, BCAST_BYTES, 31),
            "256 KiB MPI_Bcast from rank 1 on it: %s, data %s",
            class_name(class_of(rc)),
            tap_check(b, BCAST_BYTES, 31) ? "intact" : "WRONG");
        free(b);
        MPI_Comm_free(&nc);
    }
    return finish(surv, NSURV);
}
