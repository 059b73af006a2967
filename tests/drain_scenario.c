/* ftw-test: np=4 mode=ftwrap timeout=40 link=ftwrap expect-failed=2 fate=2:signal:KILL */
/*
 * drain_scenario - a process blocked in a receive joins a drain through
 * its failure handler.
 *
 * Every rank registers handler H on MPI_COMM_WORLD (MPI_Comm_create_
 * errhandler + FTW_Comm_set_failhandler).  Rank 1 posts MPI_Isend of a
 * small checksummed message to rank 0 with tag T2, for which rank 0 never
 * posts a receive (it probes it with MPI_Iprobe until it has arrived);
 * then, after a barrier: rank 0 blocks in MPI_Recv from
 * rank 1 (tag T, never sent); rank 1 blocks in MPI_Recv from rank 2; rank
 * 2 sleeps 200 ms and SIGKILLs itself; rank 3 polls with MPI_Iprobe.
 * Rank 1's MPI_Recv returns FTW_ERR_PROC_FAIL_STOP (bounded time) and
 * rank 1 calls FTW_Comm_drain_all(MPI_COMM_WORLD) itself (its H only
 * notes the call); H on ranks 0 and 3 calls FTW_Comm_drain_all: on rank 0
 * inside the blocked MPI_Recv, which then returns FTW_ERR_DRAINED (bounded
 * time, buffer untouched).  Every drain returns MPI_SUCCESS, H ran once
 * everywhere with a code of class FTW_ERR_PROC_FAIL_STOP.  Rank 1's
 * MPI_Wait on the T2 send gives MPI_SUCCESS or FTW_ERR_DRAINED at once.
 * After the drain: rank 0 sees nothing from rank 1 (MPI_Iprobe(1,
 * MPI_ANY_TAG) for 200 ms), then checksummed messages of 64 B and 1 MiB go
 * 0 -> 1, 1 -> 0 (tag T2 again: the old T2 message must not match it),
 * 3 -> 0 and 0 -> 3, and MPI_Iprobe(1, T2) on rank 0 still finds nothing.
 * Ranks 1 and 3 send their verdicts to rank 0, which prints TAP (plan at
 * the end); the survivors end with MPI_Finalize.
 */
#define NP 4
#include "ftcheck.h"

#define VICTIM 2
#define NSURV 3

#define TAG_T 40
#define TAG_T2 41
#define TAG_X 42        /* rank 1's receive from the victim */
#define TAG_NEVER 43
#define TAG_NEW 44
#define MARK_OLD 1
#define MARK_NEW 2

static volatile int in_recv;
static int h_calls, h_cls = -1, h_comm_ok, h_in_recv, h_drain_rc = -1;
static double h_drain_t;

static void handler(MPI_Comm *comm, int *code, ...)
{
    double t0;

    h_calls++;
    h_cls = class_of(*code);
    h_comm_ok = *comm == MPI_COMM_WORLD;
    h_in_recv = in_recv;
    if (rank == 1 || h_calls > 1)
        return;         /* rank 1 drains after its receive returned */
    t0 = MPI_Wtime();
    h_drain_rc = FTW_Comm_drain_all(*comm);
    h_drain_t = MPI_Wtime() - t0;
}

/* Checksummed messages from -> to of 64 B and 1 MiB, tag tag. */
static void exchange(int from, int to, int tag, const char *what)
{
    static const size_t lens[2] = {SMALL, BIG};
    char desc[128];

    for (int i = 0; i < 2; i++) {
        size_t len = lens[i];
        unsigned char *buf = xmalloc(len);
        uint64_t seed = seed_of(from, to, MARK_NEW + i, len);
        MPI_Status st;
        double t0 = MPI_Wtime();
        int rc;

        snprintf(desc, sizeof desc, "%s: %d -> %d, %zu bytes, tag %d", what,
                 from, to, len, tag);
        if (rank == from) {
            tap_fill(buf, len, seed);
            rc = MPI_Send(buf, (int)len, MPI_BYTE, to, tag, MPI_COMM_WORLD);
            chk_class(rc, MPI_SUCCESS, desc);
        } else {
            memset(buf, 0, len);
            rc = MPI_Recv(buf, (int)len, MPI_BYTE, from, tag,
                          MPI_COMM_WORLD, &st);
            chk_data(rc, &st, buf, len, seed, desc);
            chk(rc == MPI_SUCCESS && st.MPI_SOURCE == from,
                "%s: MPI_SOURCE %d", desc, rc == MPI_SUCCESS ?
                st.MPI_SOURCE : -1);
        }
        chk_time(MPI_Wtime() - t0, BOUND, desc);
        free(buf);
    }
}

int main(int argc, char **argv)
{
    static const int surv[NSURV] = {0, 1, 3};
    unsigned char old[SMALL];
    MPI_Errhandler eh;
    MPI_Request sreq = MPI_REQUEST_NULL;
    double t0, t;
    int rc, v;

    if (!setup(&argc, &argv))
        return 0;
    MPI_Comm_create_errhandler(handler, &eh);
    rc = FTW_Comm_set_failhandler(MPI_COMM_WORLD, eh);
    chk_class(rc, MPI_SUCCESS, "FTW_Comm_set_failhandler(MPI_COMM_WORLD)");
    if (rank == 1) {
        tap_fill(old, SMALL, seed_of(1, 0, MARK_OLD, SMALL));
        rc = MPI_Isend(old, SMALL, MPI_BYTE, 0, TAG_T2, MPI_COMM_WORLD,
                       &sreq);
        chk_class(rc, MPI_SUCCESS, "MPI_Isend with tag T2 to rank 0 before "
                  "the failure (never received)");
    }

    if (rank == 0) {
        /* The T2 message is here before the drain (probed, not received). */
        MPI_Status st;
        int flag = 0;

        step = "rank 0: MPI_Iprobe(1, T2) before the failure";
        rc = MPI_SUCCESS;
        t0 = MPI_Wtime();
        while (!flag && rc == MPI_SUCCESS && MPI_Wtime() - t0 < BOUND)
            rc = MPI_Iprobe(1, TAG_T2, MPI_COMM_WORLD, &flag, &st);
        chk(rc == MPI_SUCCESS && flag, "before the failure MPI_Iprobe(1, T2) "
            "on rank 0 sees the T2 message (%s, flag %d)", CLS(rc), flag);
    }
    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS)
        tap_diag("barrier before the kill failed");
    if (rank == VICTIM)
        victim();
    watchdog_start(15.0);

    if (rank == 0) {
        step = "rank 0: MPI_Recv from 1 (tag T) while 2 dies";
        v = -7777;
        in_recv = 1;
        t0 = MPI_Wtime();
        rc = MPI_Recv(&v, 1, MPI_INT, 1, TAG_T, MPI_COMM_WORLD,
                      MPI_STATUS_IGNORE);
        t = MPI_Wtime() - t0;
        in_recv = 0;
        chk_class(rc, FTW_ERR_DRAINED, "rank 0's blocked MPI_Recv from rank "
                  "1 after its handler drained");
        chk_time(t, BOUND + KILL_DELAY_US * 1e-6, "rank 0's MPI_Recv");
        chk(v == -7777, "rank 0's receive buffer untouched (%d)", v);
        chk(h_calls == 1 && h_in_recv, "H ran inside the blocked MPI_Recv "
            "(calls %d, inside %d)", h_calls, h_in_recv);
    } else if (rank == 1) {
        step = "rank 1: MPI_Recv from 2 while 2 dies";
        v = -7777;
        in_recv = 1;
        t0 = MPI_Wtime();
        rc = MPI_Recv(&v, 1, MPI_INT, VICTIM, TAG_X, MPI_COMM_WORLD,
                      MPI_STATUS_IGNORE);
        t = MPI_Wtime() - t0;
        in_recv = 0;
        chk_class(rc, FTW_ERR_PROC_FAIL_STOP, "rank 1's MPI_Recv from dead "
                  "rank 2");
        chk_time(t, BOUND + KILL_DELAY_US * 1e-6, "rank 1's MPI_Recv");
        step = "rank 1: FTW_Comm_drain_all";
        t0 = MPI_Wtime();
        rc = FTW_Comm_drain_all(MPI_COMM_WORLD);
        chk_class(rc, MPI_SUCCESS, "rank 1: FTW_Comm_drain_all after the "
                  "failed receive");
        chk_time(MPI_Wtime() - t0, BOUND, "rank 1: FTW_Comm_drain_all");
        step = "rank 1: MPI_Wait on the T2 send";
        t0 = MPI_Wtime();
        rc = MPI_Wait(&sreq, MPI_STATUS_IGNORE);
        chk(class_of(rc) == MPI_SUCCESS || class_of(rc) == FTW_ERR_DRAINED,
            "MPI_Wait on the MPI_Isend made before the drain: %s (want "
            "MPI_SUCCESS or FTW_ERR_DRAINED)", CLS(rc));
        chk_time(MPI_Wtime() - t0, AT_ONCE, "MPI_Wait on the T2 send");
        chk(sreq == MPI_REQUEST_NULL, "the T2 send's request is freed");
    } else {
        step = "rank 3: polling until H ran";
        t0 = MPI_Wtime();
        rc = MPI_SUCCESS;
        while (h_calls == 0 && MPI_Wtime() - t0 < BOUND) {
            int flag = 0;

            rc = MPI_Iprobe(0, TAG_NEVER, MPI_COMM_WORLD, &flag,
                            MPI_STATUS_IGNORE);
            usleep(1000);
        }
        chk(h_calls > 0, "rank 3: H ran while polling with MPI_Iprobe "
            "(last MPI_Iprobe %s)", CLS(rc));
    }

    chk(h_calls == 1, "H ran once (%d)", h_calls);
    chk(h_cls == FTW_ERR_PROC_FAIL_STOP && h_comm_ok, "H got MPI_COMM_WORLD "
        "(%d) and a code of class FTW_ERR_PROC_FAIL_STOP (%s)", h_comm_ok,
        class_name(h_cls));
    if (rank != 1) {
        chk_class(h_drain_rc, MPI_SUCCESS, "FTW_Comm_drain_all inside H");
        chk_time(h_drain_t, BOUND, "FTW_Comm_drain_all inside H");
    }

    /* The clean communicator. */
    if (rank == 0)
        chk_nothing(MPI_COMM_WORLD, 1, MPI_ANY_TAG, "after the drain, "
                    "nothing from rank 1");
    if (rank == 0 || rank == 1) {
        exchange(0, 1, TAG_NEW, "after the drain");
        exchange(1, 0, TAG_T2, "after the drain, tag T2 again");
    }
    if (rank == 0 || rank == 3) {
        exchange(3, 0, TAG_NEW, "after the drain");
        exchange(0, 3, TAG_NEW, "after the drain");
    }
    if (rank == 0)
        chk_nothing(MPI_COMM_WORLD, 1, TAG_T2, "the T2 message sent before "
                    "the drain never shows");

    return finish(surv, NSURV);
}
