/* ftw-test: np=4 mode=ftwrap timeout=40 link=ftwrap expect-failed=1 fate=1:signal:KILL */
/*
 * drain_ranks - after FTW_Comm_drain_all has excluded a LOW rank, every
 * status and every peer argument still uses the application's rank
 * numbers (the traffic runs on a communicator of the survivors, where
 * ranks 2 and 3 are 1 and 2).
 *
 * As drain_requests, with rank 1 failing and survivors 0, 2, 3 (ring
 * 0 -> 2 -> 3 -> 0).  Before the failure every survivor posts on
 * MPI_COMM_WORLD: a (MPI_Irecv from right, never sent), b (MPI_Irecv from
 * left, whose message arrives before the drain), c (MPI_Irecv(ANY_SOURCE),
 * never sent), d (a started persistent receive from right).  Rank 1 leaves
 * a barrier, sleeps 200 ms and SIGKILLs itself; once each survivor knows,
 * FTW_Comm_drain_all(MPI_COMM_WORLD).  Then MPI_Wait on a, c, d gives
 * FTW_ERR_DRAINED, on b MPI_SUCCESS with the data and MPI_SOURCE = left
 * (2 on rank 3, 3 on rank 0, 0 on rank 2); MPI_Start on d gives
 * FTW_ERR_DRAINED.  Rings of 8 B and 1 MiB over 0 -> 2 -> 3 -> 0; after
 * FTW_Comm_reenable_any_source (group {1}) rounds of messages to both
 * other survivors, received through MPI_Recv(ANY_SOURCE), MPI_Probe
 * (ANY_SOURCE), MPI_Iprobe(2 / 3), MPI_Waitall, MPI_Waitany, MPI_Testsome,
 * MPI_Improbe/MPI_Mrecv, MPI_Test and MPI_Request_get_status: every
 * MPI_SOURCE is the sender's own rank (2 and 3 come out as 2 and 3), and
 * the first int of each message (the sender's rank) and its checksum
 * agree.  A send to or receive from rank 1 fails at once with
 * FTW_ERR_PROC_FAIL_STOP.  Ranks 2 and 3 send their verdicts to rank 0,
 * which prints TAP (plan at the end); the survivors end with MPI_Finalize.
 */
#define NP 4
#include "ftcheck.h"

#define VICTIM 1
#define NSURV 3

int main(int argc, char **argv)
{
    static const int surv[NSURV] = {0, 2, 3};
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
