/* ftw-test: np=4 mode=ftwrap timeout=40 link=ftwrap expect-failed=3 fate=3:signal:KILL */
/*
 * drain_requests - what FTW_Comm_drain_all does to outstanding requests,
 * and point-to-point after it.
 *
 * Before the failure every survivor of {0,1,2} posts on MPI_COMM_WORLD
 * (right, left: the next and previous one in the ring 0 -> 1 -> 2 -> 0):
 *   a  MPI_Irecv from right, a tag nobody sends;
 *   b  MPI_Irecv from left, whose checksummed message left sends before
 *      the drain (polled with MPI_Request_get_status until it is in);
 *   c  MPI_Irecv(MPI_ANY_SOURCE), a tag nobody sends;
 *   d  a persistent receive (MPI_Recv_init from right, MPI_Start) that
 *      nobody matches.
 * Rank 3 leaves a barrier, sleeps 200 ms and SIGKILLs itself; once each
 * survivor knows, it calls FTW_Comm_drain_all(MPI_COMM_WORLD) (success,
 * bounded time).  Then MPI_Wait on a, c and d gives FTW_ERR_DRAINED at
 * once, on b MPI_SUCCESS with the data (checksum) and MPI_SOURCE left;
 * MPI_Start on d gives FTW_ERR_DRAINED.  Point-to-point among 0, 1, 2
 * with their own rank numbers works (tests/ftcheck.h traffic_after_drain:
 * rings of 8 B and 1 MiB; after FTW_Comm_reenable_any_source, which gives
 * {3}, rounds of messages received through MPI_Recv(ANY_SOURCE),
 * MPI_Probe, MPI_Iprobe, MPI_Waitall, MPI_Waitany, MPI_Testsome,
 * MPI_Improbe/MPI_Mrecv, MPI_Test and MPI_Request_get_status, each status
 * giving the sender's rank), and a send to or a receive from rank 3 fails
 * at once with FTW_ERR_PROC_FAIL_STOP.  Ranks 1 and 2 send their verdicts
 * to rank 0, which prints TAP (plan at the end); the survivors end with
 * MPI_Finalize.
 */
#define NP 4
#include "ftcheck.h"

#define VICTIM 3
#define NSURV 3

int main(int argc, char **argv)
{
    static const int surv[NSURV] = {0, 1, 2};
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

    step = "FTW_Comm_drain_all";
    t0 = MPI_Wtime();
    rc = FTW_Comm_drain_all(MPI_COMM_WORLD);
    chk_class(rc, MPI_SUCCESS, "FTW_Comm_drain_all(MPI_COMM_WORLD)");
    chk_time(MPI_Wtime() - t0, BOUND, "FTW_Comm_drain_all");

    outstanding_after(&o);
    traffic_after_drain(surv, 1 << VICTIM);
    return finish(surv, NSURV);
}
