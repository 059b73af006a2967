/* ftw-test: np=4 mode=ftwrap timeout=40 link=ftwrap expect-failed=3 fate=3:signal:KILL */
/*
 * failhandler - failure handlers in FTW_FAILHANDLER_MODE_ALL.
 *
 * Before the failure, on every rank: the mode is FTW_FAILHANDLER_MODE_ALL
 * by default; handler W (MPI_Comm_create_errhandler) is registered with
 * FTW_Comm_set_failhandler on MPI_COMM_WORLD, then handler D on a
 * duplicate d, and handler X on a second duplicate x, which is removed
 * again with FTW_FAILHANDLER_NULL; FTW_Comm_get_failhandler gives W, D and
 * FTW_FAILHANDLER_NULL; MPI_ERRORS_RETURN is refused (MPI_ERR_ARG);
 * FTW_Failhandler_set_mode(SUBSET) now fails with MPI_ERR_OTHER, setting
 * the current mode again succeeds.
 *
 * Rank 3 leaves a barrier, sleeps 200 ms and SIGKILLs itself.  Rank 0 is
 * blocked in MPI_Recv from rank 1, which sends only 100 ms after its own
 * handlers ran (ranks 1 and 2 poll with MPI_Iprobe from rank 0 until
 * then).  On rank 0, W must have run inside that MPI_Recv.  On every
 * survivor: W and D ran exactly once each, in that order (W, D), with
 * their own communicator and a code of class FTW_ERR_PROC_FAIL_STOP; the
 * MPI calls made inside W (MPI_Comm_rank, FTW_Comm_group_failed, which
 * shows rank 3) succeeded; X never ran; after a point-to-point exchange
 * among the survivors no handler has run again.  Ranks 1 and 2 send their
 * verdicts to rank 0, which prints TAP (plan at the end); the survivors
 * end with MPI_Finalize.
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

#define TAG_GO 30
#define TAG_XCHG 31
#define TAG_NEVER 32
#define SEND_MARGIN_US 100000 /* rank 1: its handlers ran to its send */

static MPI_Comm d = MPI_COMM_NULL, x = MPI_COMM_NULL;
static int order[8], norder;
static int w_calls, d_calls, x_calls;
static int w_cls = -1, d_cls = -1, w_comm_ok, d_comm_ok;
static int w_rank_rc = -1, w_rank = -1, w_gf_rc = -1, w_gf_mask = -1;
static volatile int in_recv;
static int w_in_recv;

static void handler_w(MPI_Comm *comm, int *code, ...)
{
    MPI_Group g;
    int n = 0;

    if (norder < 8)
        order[norder++] = 'W';
    w_calls++;
    w_cls = class_of(*code);
    w_comm_ok = *comm == MPI_COMM_WORLD;
    w_in_recv = in_recv;
    /* MPI calls inside a handler. */
    w_rank_rc = MPI_Comm_rank(*comm, &w_rank);
    w_gf_rc = FTW_Comm_group_failed(*comm, &g);
    if (w_gf_rc == MPI_SUCCESS) {
        w_gf_mask = world_mask_of(g, &n);
        MPI_Group_free(&g);
    }
}

static void handler_d(MPI_Comm *comm, int *code, ...)
{
    if (norder < 8)
        order[norder++] = 'D';
    d_calls++;
    d_cls = class_of(*code);
    d_comm_ok = *comm == d;
}

static void handler_x(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    (void)code;
    x_calls++;
}

/* Before the failure: registration, queries and the mode. */
static void register_handlers(void)
{
    MPI_Errhandler ew, ed, ex, got;
    int rc, mode = -1;

    rc = FTW_Failhandler_get_mode(&mode);
    chk(rc == MPI_SUCCESS && mode == FTW_FAILHANDLER_MODE_ALL,
        "FTW_Failhandler_get_mode: ALL by default (got %d)", mode);
    MPI_Comm_dup(MPI_COMM_WORLD, &d);
    MPI_Comm_dup(MPI_COMM_WORLD, &x);
    MPI_Comm_set_errhandler(d, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(x, MPI_ERRORS_RETURN);
    MPI_Comm_create_errhandler(handler_w, &ew);
    MPI_Comm_create_errhandler(handler_d, &ed);
    MPI_Comm_create_errhandler(handler_x, &ex);

    rc = FTW_Comm_set_failhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    chk_class(rc, MPI_ERR_ARG, "FTW_Comm_set_failhandler(MPI_ERRORS_RETURN)");
    rc = FTW_Comm_set_failhandler(MPI_COMM_WORLD, ew);
    chk_class(rc, MPI_SUCCESS, "FTW_Comm_set_failhandler(WORLD, W)");
    rc = FTW_Comm_set_failhandler(d, ed);
    chk_class(rc, MPI_SUCCESS, "FTW_Comm_set_failhandler(d, D)");
    rc = FTW_Comm_set_failhandler(x, ex);
    chk_class(rc, MPI_SUCCESS, "FTW_Comm_set_failhandler(x, X)");
    rc = FTW_Comm_set_failhandler(x, FTW_FAILHANDLER_NULL);
    chk_class(rc, MPI_SUCCESS, "FTW_Comm_set_failhandler(x, NULL)");

    got = MPI_ERRHANDLER_NULL;
    rc = FTW_Comm_get_failhandler(MPI_COMM_WORLD, &got);
    chk(rc == MPI_SUCCESS && got == ew, "FTW_Comm_get_failhandler(WORLD) "
        "gives W (%s)", class_name(class_of(rc)));
    got = MPI_ERRHANDLER_NULL;
    rc = FTW_Comm_get_failhandler(d, &got);
    chk(rc == MPI_SUCCESS && got == ed, "FTW_Comm_get_failhandler(d) gives D "
        "(%s)", class_name(class_of(rc)));
    got = ex;
    rc = FTW_Comm_get_failhandler(x, &got);
    chk(rc == MPI_SUCCESS && got == FTW_FAILHANDLER_NULL,
        "FTW_Comm_get_failhandler(x) gives FTW_FAILHANDLER_NULL after "
        "removal (%s)", class_name(class_of(rc)));

    rc = FTW_Failhandler_set_mode(FTW_FAILHANDLER_MODE_SUBSET);
    chk_class(rc, MPI_ERR_OTHER, "FTW_Failhandler_set_mode(SUBSET) after "
              "a handler was registered");
    rc = FTW_Failhandler_set_mode(FTW_FAILHANDLER_MODE_ALL);
    chk_class(rc, MPI_SUCCESS, "FTW_Failhandler_set_mode(ALL), the "
              "current mode, after a handler was registered");
    mode = -1;
    FTW_Failhandler_get_mode(&mode);
    chk(mode == FTW_FAILHANDLER_MODE_ALL, "mode still ALL (got %d)", mode);
}

/* Ranks 1, 2: make MPI calls until the own handlers have run. */
static void poll_until_handled(void)
{
    double t0 = MPI_Wtime();
    int flag, rc = MPI_SUCCESS;

    while (w_calls == 0 && MPI_Wtime() - t0 < BOUND) {
        flag = 0;
        rc = MPI_Iprobe(0, TAG_NEVER, MPI_COMM_WORLD, &flag,
                        MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            break;
        usleep(1000);
    }
    chk(w_calls > 0, "handler W ran within %.0f s while polling with "
        "MPI_Iprobe (after %.3f s; last MPI_Iprobe %s)", BOUND,
        MPI_Wtime() - t0, class_name(class_of(rc)));
}

int main(int argc, char **argv)
{
    static const int surv[NSURV] = {0, 1, 2};
    int rc, v;
    double t0, t;

    if (!setup(&argc, &argv))
        return 0;
    register_handlers();

    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS)
        tap_diag("barrier before the kill failed");
    chk(w_calls == 0 && d_calls == 0 && x_calls == 0,
        "no handler ran before the failure");
    if (rank == VICTIM)
        victim();
    watchdog_start(15.0);

    if (rank == 0) {
        step = "rank 0: MPI_Recv from 1 while 3 dies";
        v = -1;
        in_recv = 1;
        t0 = MPI_Wtime();
        rc = MPI_Recv(&v, 1, MPI_INT, 1, TAG_GO, MPI_COMM_WORLD,
                      MPI_STATUS_IGNORE);
        t = MPI_Wtime() - t0;
        in_recv = 0;
        chk(rc == MPI_SUCCESS && v == 4242,
            "MPI_Recv from 1 (blocked as 3 dies): %s, %d (want 4242)",
            class_name(class_of(rc)), v);
        chk_time(t, BOUND + KILL_DELAY_US * 1e-6, "MPI_Recv from 1");
        chk(w_calls == 1 && w_in_recv,
            "handler W ran inside the blocked MPI_Recv (calls %d, inside "
            "%d)", w_calls, w_in_recv);
    } else {
        step = "polling until the handlers ran";
        poll_until_handled();
        if (rank == 1) {
            usleep(SEND_MARGIN_US);
            v = 4242;
            step = "rank 1: MPI_Send to 0";
            rc = MPI_Send(&v, 1, MPI_INT, 0, TAG_GO, MPI_COMM_WORLD);
            chk_class(rc, MPI_SUCCESS, "MPI_Send to rank 0 after the handler");
        }
    }

    chk(w_calls == 1 && d_calls == 1,
        "W and D ran once each (W %d, D %d)", w_calls, d_calls);
    chk(norder == 2 && order[0] == 'W' && order[1] == 'D',
        "handlers ran in registration order: %c%c (want WD, %d calls)",
        norder > 0 ? order[0] : '-', norder > 1 ? order[1] : '-', norder);
    chk(w_cls == FTW_ERR_PROC_FAIL_STOP && d_cls == FTW_ERR_PROC_FAIL_STOP,
        "handler codes: W %s, D %s (want FTW_ERR_PROC_FAIL_STOP)",
        class_name(w_cls), class_name(d_cls));
    chk(w_comm_ok && d_comm_ok, "handlers got their communicators: W "
        "MPI_COMM_WORLD %d, D d %d", w_comm_ok, d_comm_ok);
    chk(w_rank_rc == MPI_SUCCESS && w_rank == rank,
        "MPI_Comm_rank inside W: %s, %d", class_name(class_of(w_rank_rc)),
        w_rank);
    chk(w_gf_rc == MPI_SUCCESS && w_gf_mask == 1 << VICTIM,
        "FTW_Comm_group_failed inside W: %s, %s (want {3})",
        class_name(class_of(w_gf_rc)), mask_str(w_gf_mask));
    chk(x_calls == 0, "removed handler X never ran (%d calls)", x_calls);

    /* More MPI calls: the same failure calls no handler again. */
    step = "point-to-point exchange among the survivors";
    {
        int right = (rank + 1) % NSURV, left = (rank + NSURV - 1) % NSURV;
        int got = -1;

        rc = MPI_Sendrecv(&rank, 1, MPI_INT, right, TAG_XCHG, &got, 1,
                          MPI_INT, left, TAG_XCHG, d, MPI_STATUS_IGNORE);
        chk(rc == MPI_SUCCESS && got == left, "MPI_Sendrecv ring on d: %s, "
            "%d (want %d)", class_name(class_of(rc)), got, left);
        rc = MPI_Sendrecv(&rank, 1, MPI_INT, left, TAG_XCHG, &got, 1,
                          MPI_INT, right, TAG_XCHG, MPI_COMM_WORLD,
                          MPI_STATUS_IGNORE);
        chk(rc == MPI_SUCCESS && got == right, "MPI_Sendrecv ring on WORLD: "
            "%s, %d (want %d)", class_name(class_of(rc)), got, right);
    }
    chk(w_calls == 1 && d_calls == 1 && x_calls == 0,
        "no handler ran again for the same failure (W %d, D %d, X %d)",
        w_calls, d_calls, x_calls);

    return finish(surv, NSURV);
}
