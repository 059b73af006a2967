/* ftw-test: np=4 mode=ftwrap timeout=40 link=ftwrap expect-failed=3 fate=3:signal:KILL */
/*
 * ivalidate - FTW_Icomm_validate and FTW_Comm_validate_multiple.
 *
 * Before the failure every rank makes two duplicates of MPI_COMM_WORLD,
 * d1 and d2.  Rank 3 leaves a barrier, sleeps 200 ms and SIGKILLs itself.
 * Once each survivor knows of the failure:
 *   - FTW_Icomm_validate on MPI_COMM_WORLD + MPI_Wait: MPI_SUCCESS within
 *     5 s, the request freed, the group {3};
 *   - FTW_Icomm_validate on d2 completed by polling MPI_Test: {3};
 *   - FTW_Comm_validate_multiple over {MPI_COMM_WORLD, d1}: one process,
 *     world rank 3 (through MPI_Group_translate_ranks);
 *   - MPI_Allreduce works afterwards on MPI_COMM_WORLD, d1 and d2 (0+1+2).
 * Ranks 1 and 2 send their verdicts to rank 0, which prints TAP (plan at
 * the end); the survivors end with MPI_Finalize.
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
#define BOUND 5.0            /* seconds a call may take after the kill */
#define AT_ONCE 1.0          /* seconds for a call that must fail at once */
#define KILL_DELAY_US 200000 /* victim: from the barrier to its death */
#define SENT (-7777)

#include "survivors.h"

int main(int argc, char **argv)
{
    static const int surv[NSURV] = {0, 1, 2};
    MPI_Comm d1, d2;
    MPI_Request req;
    MPI_Group g;
    int rc, flag;
    double t0;

    if (!setup(&argc, &argv))
        return 0;
    MPI_Comm_dup(MPI_COMM_WORLD, &d1);
    MPI_Comm_dup(MPI_COMM_WORLD, &d2);
    MPI_Comm_set_errhandler(d1, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(d2, MPI_ERRORS_RETURN);

    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS)
        tap_diag("barrier before the kill failed");
    if (rank == VICTIM)
        victim();
    watchdog_start(15.0);

    step = "waiting to know of the failure";
    wait_known(1 << VICTIM, BOUND);

    step = "FTW_Icomm_validate + MPI_Wait on WORLD";
    t0 = MPI_Wtime();
    g = MPI_GROUP_NULL;
    req = MPI_REQUEST_NULL;
    rc = FTW_Icomm_validate(MPI_COMM_WORLD, &g, &req);
    chk_class(rc, MPI_SUCCESS, "FTW_Icomm_validate on WORLD posted");
    if (rc == MPI_SUCCESS) {
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        chk_time(MPI_Wtime() - t0, BOUND, "FTW_Icomm_validate + MPI_Wait");
        chk(req == MPI_REQUEST_NULL, "MPI_Wait freed the validate request");
        chk_group3(rc, &g, "FTW_Icomm_validate(WORLD) + MPI_Wait");
    }

    step = "FTW_Icomm_validate + MPI_Test on d2";
    t0 = MPI_Wtime();
    g = MPI_GROUP_NULL;
    req = MPI_REQUEST_NULL;
    rc = FTW_Icomm_validate(d2, &g, &req);
    chk_class(rc, MPI_SUCCESS, "FTW_Icomm_validate on d2 posted");
    if (rc == MPI_SUCCESS) {
        flag = 0;
        while (rc == MPI_SUCCESS && !flag && MPI_Wtime() - t0 < BOUND)
            rc = MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        chk(flag, "FTW_Icomm_validate(d2): MPI_Test completed it within "
            "%.0f s (after %.3f s)", BOUND, MPI_Wtime() - t0);
        if (!flag && rc == MPI_SUCCESS) {
            /* Not completed by MPI_Test: finish it with MPI_Wait so the
             * rest of the test runs on its own. */
            step = "MPI_Wait on the d2 validate MPI_Test did not complete";
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
            tap_diag("d2 validate: MPI_Wait after MPI_Test gave %s",
                     class_name(class_of(rc)));
        }
        chk_group3(rc, &g, "FTW_Icomm_validate(d2) + MPI_Test");
    }

    step = "FTW_Comm_validate_multiple {WORLD, d1}";
    {
        MPI_Comm comms[2] = {MPI_COMM_WORLD, d1};

        t0 = MPI_Wtime();
        g = MPI_GROUP_NULL;
        rc = FTW_Comm_validate_multiple(2, comms, &g);
        chk_time(MPI_Wtime() - t0, BOUND, "FTW_Comm_validate_multiple");
        chk_group3(rc, &g, "FTW_Comm_validate_multiple({WORLD, d1})");
    }

    chk_allreduce(MPI_COMM_WORLD, 3, "WORLD after validate");
    chk_allreduce(d1, 3, "d1 after validate_multiple");
    chk_allreduce(d2, 3, "d2 after Icomm_validate");

    return finish(surv, NSURV);
}
