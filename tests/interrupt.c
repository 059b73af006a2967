/* ftw-test: np=4 mode=ftwrap timeout=40 link=ftwrap expect-failed=3 fate=3:signal:KILL */
/*
 * interrupt - FTW_Comm_set_interrupt: a blocking call on an interrupt-mode
 * communicator returns FTW_ERR_INTERRUPTED when a process fails while it
 * waits; without the mode it keeps waiting.
 *
 * icomm is an MPI_Comm_dup of MPI_COMM_WORLD with MPI_ERRORS_RETURN and
 * interrupt mode on (FTW_Comm_set_interrupt(icomm, 1)).  Rank 3 waits for
 * a message from each of ranks 0-2, sent just before each blocks, then
 * sleeps 200 ms and SIGKILLs itself while:
 *   rank 0 blocks in MPI_Recv from rank 1 on icomm (rank 1 never sends it):
 *     FTW_ERR_INTERRUPTED, after the kill and within 5 s of it, buffer
 *     untouched;
 *   rank 1 blocks in MPI_Probe from rank 0 on icomm (nothing comes):
 *     FTW_ERR_INTERRUPTED likewise;
 *   rank 2 blocks in MPI_Recv from rank 1 on MPI_COMM_WORLD (no interrupt
 *     mode), which rank 1 sends 300 ms after it knows of the failure: the
 *     receive stays blocked across the failure and completes with the data
 *     (checksum), not FTW_ERR_INTERRUPTED.
 * Then, the failure known: rank 0's MPI_Recv from rank 1 on MPI_COMM_WORLD
 * and, on icomm, an MPI_Recv and an MPI_Probe that block (rank 1 sends 300
 * ms later each) complete normally with the data: the old failure does
 * not interrupt later calls.  A ring 0 -> 1 -> 2 -> 0 on icomm of 8 B and
 * 1 MiB works; a send to rank 3 on icomm fails with FTW_ERR_PROC_FAIL_STOP.
 * Ranks 1 and 2 send their verdicts to rank 0, which prints TAP (plan at
 * the end); the survivors end with MPI_Finalize.
 */
#define NP 4
#include "ftcheck.h"

#define VICTIM 3
#define NSURV 3
#define LATE_US 300000

#define TAG_IA 50        /* 0 <- 1 on icomm, never sent */
#define TAG_IP 51        /* 1 probes 0 on icomm, never sent */
#define TAG_ID 52        /* 2 <- 1 on WORLD, late */
#define TAG_IB 53        /* 0 <- 1 on WORLD, late */
#define TAG_IC 54        /* 0 <- 1 on icomm, late */
#define TAG_IE 55        /* 0 probes 1 on icomm, late */
#define TAG_READY 56

static MPI_Comm icomm;

static void late_send(int to, int tag, MPI_Comm comm, const char *what)
{
    unsigned char buf[SMALL];
    int rc;

    sleep_us(LATE_US);
    tap_fill(buf, SMALL, seed_of(rank, to, tag, SMALL));
    rc = MPI_Send(buf, SMALL, MPI_BYTE, to, tag, comm);
    chk_class(rc, MPI_SUCCESS, what);
}

/* A blocking receive that must wait for a late message and get it. */
static void late_recv(int from, int tag, MPI_Comm comm, const char *what)
{
    unsigned char buf[SMALL];
    MPI_Status st;
    double t0 = MPI_Wtime(), t;
    int rc;

    memset(buf, 0, sizeof buf);
    rc = MPI_Recv(buf, SMALL, MPI_BYTE, from, tag, comm, &st);
    t = MPI_Wtime() - t0;
    chk_data(rc, &st, buf, SMALL, seed_of(from, rank, tag, SMALL), what);
    chk_time(t, BOUND, what);
}

int main(int argc, char **argv)
{
    static const int surv[NSURV] = {0, 1, 2};
    double t0, t, tkill;
    MPI_Status st;
    int rc, v;

    if (!setup(&argc, &argv))
        return 0;
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &icomm);
    chk_class(rc, MPI_SUCCESS, "MPI_Comm_dup(MPI_COMM_WORLD)");
    MPI_Comm_set_errhandler(icomm, MPI_ERRORS_RETURN);
    rc = FTW_Comm_set_interrupt(icomm, 1);
    chk_class(rc, MPI_SUCCESS, "FTW_Comm_set_interrupt(icomm, 1)");

    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS)
        tap_diag("barrier before the kill failed");
    if (rank == VICTIM) {
        /* Die 200 ms after every survivor said it is about to block. */
        for (int r = 0; r < NSURV; r++)
            MPI_Recv(&v, 1, MPI_INT, r, TAG_READY, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        victim();
    }
    watchdog_start(15.0);
    t0 = MPI_Wtime();
    tkill = KILL_DELAY_US * 1e-6;
    rc = MPI_Send(&rank, 1, MPI_INT, VICTIM, TAG_READY, MPI_COMM_WORLD);
    chk_class(rc, MPI_SUCCESS, "MPI_Send of 'about to block' to rank 3");

    if (rank == 0) {
        step = "rank 0: MPI_Recv from 1 on icomm while 3 dies";
        v = -7777;
        rc = MPI_Recv(&v, 1, MPI_INT, 1, TAG_IA, icomm, &st);
        t = MPI_Wtime() - t0;
        chk_class(rc, FTW_ERR_INTERRUPTED, "blocked MPI_Recv on the "
                  "interrupt-mode icomm when rank 3 dies");
        chk(t > tkill && t < BOUND + KILL_DELAY_US * 1e-6, "it returned "
            "after the kill and in bounded time (%.3f s)", t);
        chk(v == -7777, "the interrupted receive's buffer is untouched (%d)",
            v);

        step = "rank 0: MPI_Recv from 1 on WORLD, sent late";
        late_recv(1, TAG_IB, MPI_COMM_WORLD, "MPI_Recv on MPI_COMM_WORLD "
                  "after the failure, sent 300 ms late");
        step = "rank 0: MPI_Recv from 1 on icomm, sent late";
        late_recv(1, TAG_IC, icomm, "MPI_Recv on icomm after the failure, sent "
                  "300 ms late (not interrupted by the old failure)");
        step = "rank 0: MPI_Probe from 1 on icomm, sent late";
        t0 = MPI_Wtime();
        rc = MPI_Probe(1, TAG_IE, icomm, &st);
        chk(rc == MPI_SUCCESS && st.MPI_SOURCE == 1 && st.MPI_TAG == TAG_IE,
            "MPI_Probe on icomm after the failure, sent 300 ms late: %s, "
            "source %d", CLS(rc), rc == MPI_SUCCESS ? st.MPI_SOURCE : -1);
        chk_time(MPI_Wtime() - t0, BOUND, "the late MPI_Probe");
        late_recv(1, TAG_IE, icomm, "MPI_Recv of the probed message");
    } else if (rank == 1) {
        step = "rank 1: MPI_Probe from 0 on icomm while 3 dies";
        rc = MPI_Probe(0, TAG_IP, icomm, &st);
        t = MPI_Wtime() - t0;
        chk_class(rc, FTW_ERR_INTERRUPTED, "blocked MPI_Probe on the "
                  "interrupt-mode icomm when rank 3 dies");
        chk(t > tkill && t < BOUND + KILL_DELAY_US * 1e-6, "it returned "
            "after the kill and in bounded time (%.3f s)", t);
        step = "rank 1: waiting to know of the failure";
        wait_known(1 << VICTIM, BOUND);
        step = "rank 1: late sends";
        late_send(2, TAG_ID, MPI_COMM_WORLD, "late MPI_Send to 2 on WORLD");
        late_send(0, TAG_IB, MPI_COMM_WORLD, "late MPI_Send to 0 on WORLD");
        late_send(0, TAG_IC, icomm, "late MPI_Send to 0 on icomm");
        late_send(0, TAG_IE, icomm, "late MPI_Send to 0 on icomm (probed)");
    } else {
        step = "rank 2: MPI_Recv from 1 on WORLD while 3 dies";
        late_recv(1, TAG_ID, MPI_COMM_WORLD, "MPI_Recv on MPI_COMM_WORLD "
                  "(no interrupt mode) blocked across the failure");
        t = MPI_Wtime() - t0;
        chk(t > tkill + LATE_US * 1e-6, "it stayed "
            "blocked until the late message (%.3f s)", t);
    }

    step = "ring on icomm";
    {
        static const size_t lens[2] = {8, BIG};
        int right = (rank + 1) % NSURV, left = (rank + NSURV - 1) % NSURV;

        for (int i = 0; i < 2; i++) {
            size_t len = lens[i];
            unsigned char *sb = xmalloc(len), *rb = xmalloc(len);
            MPI_Request rq[2];
            MPI_Status sts[2];
            char desc[80];

            tap_fill(sb, len, seed_of(rank, right, 60 + i, len));
            memset(rb, 0, len);
            MPI_Irecv(rb, (int)len, MPI_BYTE, left, 60 + i, icomm, &rq[0]);
            MPI_Isend(sb, (int)len, MPI_BYTE, right, 60 + i, icomm, &rq[1]);
            rc = MPI_Waitall(2, rq, sts);
            snprintf(desc, sizeof desc, "ring on icomm, %zu bytes from %d",
                     len, left);
            chk_data(rc, &sts[0], rb, len, seed_of(left, rank, 60 + i, len),
                     desc);
            free(sb);
            free(rb);
        }
    }
    step = "send to rank 3 on icomm";
    t0 = MPI_Wtime();
    v = 1;
    rc = MPI_Send(&v, 1, MPI_INT, VICTIM, 70, icomm);
    chk_class(rc, FTW_ERR_PROC_FAIL_STOP, "MPI_Send to dead rank 3 on icomm");
    chk_time(MPI_Wtime() - t0, AT_ONCE, "MPI_Send to dead rank 3 on icomm");

    return finish(surv, NSURV);
}
