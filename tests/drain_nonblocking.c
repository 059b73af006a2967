/* ftw-test: np=4 mode=ftwrap timeout=40 link=ftwrap expect-failed=3 fate=3:signal:KILL */
/*
 * drain_nonblocking - FTW_Icomm_drain_all and MPI_Wait.
 *
 * As drain_requests, with the drain nonblocking: before the failure every
 * survivor of {0,1,2} posts on MPI_COMM_WORLD a (MPI_Irecv from right,
 * never sent), b (MPI_Irecv from left, whose message arrives before the
 * drain), c (MPI_Irecv(ANY_SOURCE), never sent), d (a started persistent
 * receive from right).  Rank 3 leaves a barrier, sleeps 200 ms and
 * SIGKILLs itself; once each survivor knows, FTW_Icomm_drain_all
 * (MPI_COMM_WORLD) returns MPI_SUCCESS and a request at once, and MPI_Wait
 * on it returns MPI_SUCCESS in bounded time and sets it to
 * MPI_REQUEST_NULL.  Then MPI_Wait on a, c, d gives FTW_ERR_DRAINED, on b
 * MPI_SUCCESS with the data and MPI_SOURCE left; MPI_Start on d gives
 * FTW_ERR_DRAINED; point-to-point among 0, 1, 2 works as in drain_requests
 * (rings of 8 B and 1 MiB, every status-returning call gives the sender's
 * rank after FTW_Comm_reenable_any_source), and rank 3 is refused at once
 * with FTW_ERR_PROC_FAIL_STOP.  Ranks 1 and 2 send their verdicts to rank
 * 0, which prints TAP (plan at the end); the survivors end with
 * MPI_Finalize.
 */
#define NP 4
#include "ftcheck.h"

#define VICTIM 3
#define NSURV 3

int main(int argc, char **argv)
{
    static const int surv[NSURV] = {0, 1, 2};
    MPI_Request dr = MPI_REQUEST_NULL;
    outstanding_t o;
    double t0;
    int rc;

    if (!setup(&argc, &argv))
        return 0;
    if (rank != VICTIM)
        outstanding_post(&o, surv, NSURV);
    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS)
        tap_diag("barrier before the kill failed");
    if (rank == VICTIM)
        victim();
    watchdog_start(15.0);

    outstanding_arrived(&o);
    step = "waiting to know of the failure";
    wait_known(1 << VICTIM, BOUND);

    step = "FTW_Icomm_drain_all";
    t0 = MPI_Wtime();
    rc = FTW_Icomm_drain_all(MPI_COMM_WORLD, &dr);
    chk(rc == MPI_SUCCESS && dr != MPI_REQUEST_NULL, "FTW_Icomm_drain_all"
        "(MPI_COMM_WORLD): %s, request %s", CLS(rc),
        dr != MPI_REQUEST_NULL ? "set" : "MPI_REQUEST_NULL");
    chk_time(MPI_Wtime() - t0, AT_ONCE, "FTW_Icomm_drain_all");
    step = "MPI_Wait on the drain's request";
    t0 = MPI_Wtime();
    if (dr != MPI_REQUEST_NULL) {
        rc = MPI_Wait(&dr, MPI_STATUS_IGNORE);
        chk_class(rc, MPI_SUCCESS, "MPI_Wait on FTW_Icomm_drain_all's "
                  "request");
        chk_time(MPI_Wtime() - t0, BOUND, "MPI_Wait on the drain");
        chk(dr == MPI_REQUEST_NULL, "the drain's request is "
            "MPI_REQUEST_NULL after MPI_Wait");
    }

    outstanding_after(&o);
    traffic_after_drain(surv, 1 << VICTIM);
    return finish(surv, NSURV);
}
