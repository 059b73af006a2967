/* ftw-test: np=4 mode=ftwrap timeout=40 link=ftwrap expect-failed=3 fate=3:signal:KILL */
/*
 * failhandler_subset - failure handlers in FTW_FAILHANDLER_MODE_SUBSET.
 *
 * FTW_Failhandler_set_mode(SUBSET) comes first (FTW_Failhandler_get_mode
 * then says SUBSET).  Communicator A (MPI_Comm_split, one colour: all four
 * ranks, rank 3 included) gets handler HA on every rank; communicator B
 * (MPI_Comm_split by colour: ranks 0 and 1; the others get
 * MPI_COMM_NULL) gets handler HB on its members.  Rank 3 leaves a barrier,
 * sleeps 200 ms and SIGKILLs itself; the survivors make MPI calls
 * (MPI_Iprobe from a live rank) until HA has run, within 5 s, then 300 ms
 * more.  On every survivor HA ran exactly once, with A and a code of
 * class FTW_ERR_PROC_FAIL_STOP; HB never ran on ranks 0 and 1 (B lost no
 * process), and MPI_Allreduce on B still works (0+1).  Ranks 1 and 2 send
 * their verdicts to rank 0, which prints TAP (plan at the end); the
 * survivors end with MPI_Finalize.
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

#define TAG_NEVER 32
#define GRACE 0.3

static MPI_Comm A = MPI_COMM_NULL, B = MPI_COMM_NULL;
static int a_calls, b_calls, a_cls = -1, a_comm_ok;

static void handler_a(MPI_Comm *comm, int *code, ...)
{
    a_calls++;
    a_cls = class_of(*code);
    a_comm_ok = *comm == A;
}

static void handler_b(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    (void)code;
    b_calls++;
}

/* Make MPI calls until HA ran (want_a) or for a while. */
static double poll_mpi(int until_a, double bound)
{
    double t0 = MPI_Wtime();
    int flag, left = (rank + NSURV - 1) % NSURV;

    while ((!until_a || a_calls == 0) && MPI_Wtime() - t0 < bound) {
        flag = 0;
        if (MPI_Iprobe(left, TAG_NEVER, MPI_COMM_WORLD, &flag,
                       MPI_STATUS_IGNORE) != MPI_SUCCESS)
            break;
        usleep(1000);
    }
    return MPI_Wtime() - t0;
}

int main(int argc, char **argv)
{
    static const int surv[NSURV] = {0, 1, 2};
    MPI_Errhandler ea, eb;
    int rc, mode = -1;
    double t;

    if (!setup(&argc, &argv))
        return 0;

    rc = FTW_Failhandler_set_mode(FTW_FAILHANDLER_MODE_SUBSET);
    chk_class(rc, MPI_SUCCESS, "FTW_Failhandler_set_mode(SUBSET) first");
    rc = FTW_Failhandler_get_mode(&mode);
    chk(rc == MPI_SUCCESS && mode == FTW_FAILHANDLER_MODE_SUBSET,
        "FTW_Failhandler_get_mode: SUBSET (got %d)", mode);

    rc = MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &A);
    chk_class(rc, MPI_SUCCESS, "A = MPI_Comm_split(all ranks)");
    rc = MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : MPI_UNDEFINED, rank,
                        &B);
    chk(rc == MPI_SUCCESS && (rank < 2) == (B != MPI_COMM_NULL),
        "B = MPI_Comm_split(ranks 0, 1): %s, %s", class_name(class_of(rc)),
        B != MPI_COMM_NULL ? "member" : "MPI_COMM_NULL");
    MPI_Comm_set_errhandler(A, MPI_ERRORS_RETURN);
    if (B != MPI_COMM_NULL)
        MPI_Comm_set_errhandler(B, MPI_ERRORS_RETURN);
    MPI_Comm_create_errhandler(handler_a, &ea);
    MPI_Comm_create_errhandler(handler_b, &eb);
    rc = FTW_Comm_set_failhandler(A, ea);
    chk_class(rc, MPI_SUCCESS, "FTW_Comm_set_failhandler(A, HA)");
    if (B != MPI_COMM_NULL) {
        rc = FTW_Comm_set_failhandler(B, eb);
        chk_class(rc, MPI_SUCCESS, "FTW_Comm_set_failhandler(B, HB)");
    }
    rc = FTW_Failhandler_set_mode(FTW_FAILHANDLER_MODE_ALL);
    chk_class(rc, MPI_ERR_OTHER, "FTW_Failhandler_set_mode(ALL) after a "
              "handler was registered");

    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS)
        tap_diag("barrier before the kill failed");
    if (rank == VICTIM)
        victim();
    watchdog_start(15.0);

    step = "polling until HA ran";
    t = poll_mpi(1, BOUND + KILL_DELAY_US * 1e-6);
    chk(a_calls > 0, "HA ran within %.1f s of polling (after %.3f s)",
        BOUND + KILL_DELAY_US * 1e-6, t);
    step = "polling for the grace period";
    poll_mpi(0, GRACE);

    chk(a_calls == 1, "HA ran exactly once (%d calls)", a_calls);
    chk(a_cls == FTW_ERR_PROC_FAIL_STOP && a_comm_ok,
        "HA got A (%d) and %s (want FTW_ERR_PROC_FAIL_STOP)", a_comm_ok,
        class_name(a_cls));
    if (B != MPI_COMM_NULL) {
        int sum = -1;

        chk(b_calls == 0, "HB (B = {0,1} lost nobody) never ran (%d calls)",
            b_calls);
        step = "MPI_Allreduce on B";
        rc = MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, B);
        chk(rc == MPI_SUCCESS && sum == 1, "MPI_Allreduce on B: %s, %d "
            "(want 1)", class_name(class_of(rc)), sum);
    } else {
        chk(b_calls == 0, "HB not registered here, never ran (%d calls)",
            b_calls);
    }
    step = "MPI_Allreduce on A before validate";
    {
        int sum = -1;
        double t0 = MPI_Wtime();

        rc = MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, A);
        chk_class(rc, FTW_ERR_PROC_FAIL_STOP, "MPI_Allreduce on A (lost 3)");
        chk_time(MPI_Wtime() - t0, AT_ONCE, "MPI_Allreduce on A (lost 3)");
    }
    chk(a_calls == 1 && b_calls == 0, "no handler ran again (HA %d, HB %d)",
        a_calls, b_calls);

    return finish(surv, NSURV);
}
