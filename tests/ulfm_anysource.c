/* ftw-test: np=4 mode=ftwrap timeout=40 link=ftwrap expect-failed=3 fate=3:signal:KILL */
/*
 * ulfm_anysource - a master-worker program written for ULFM: wildcard
 * receives across a worker's death lose no message and never hang.
 *
 * The master (rank 0) takes every message with MPI_Irecv(MPI_ANY_SOURCE)
 * and MPI_Wait, and compares return codes with ULFM's constants directly
 * (rc == MPIX_ERR_PROC_FAILED_PENDING, no MPI_Error_class), as ULFM
 * programs do.  Workers 1 and 2 send NMSG checksummed messages each, the
 * second half only after the master's "go"; worker 3 sends NVICTIM and
 * SIGKILLs itself.  The master asserts:
 *   - once the failure is known, the wait on its pending wildcard receive
 *     returns MPIX_ERR_PROC_FAILED_PENDING and leaves the request pending;
 *   - before the acknowledgement the pending request still completes
 *     with messages that arrive (MPI_Test), and each new
 *     MPI_Irecv(MPI_ANY_SOURCE) is posted (MPI_SUCCESS, a request); once
 *     the first halves are in, MPI_Test reports
 *     MPIX_ERR_PROC_FAILED_PENDING with flag 0, and a blocking
 *     MPI_Recv(MPI_ANY_SOURCE) returns MPIX_ERR_PROC_FAILED and takes no
 *     message;
 *   - after MPIX_Comm_failure_ack the pending request completes with a
 *     message, and the loop goes on to the end;
 *   - every message of workers 1 and 2 arrived exactly once, in order,
 *     intact; worker 3's that arrived are a gap-free prefix, intact;
 *   - all of it within the bound (a watchdog ends a stuck survivor).
 * Workers 1 and 2 check that their sends succeeded; the survivors report
 * to rank 0, which prints TAP, and end with MPI_Finalize.
 */
#include <mpi.h>
#include <mpi-ext.h>
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
#define BOUND 10.0
#define AT_ONCE 1.0
#define KILL_DELAY_US 0

#include "survivors.h"

#define NMSG 200            /* per live worker */
#define NVICTIM 50
#define TAG_WORK 1
#define TAG_GO 2
#define WORDS 16

/* word 0: sender, 1: sequence, 2..WORDS-2: data, WORDS-1: checksum */
static void fill(int *m, int from, int seq)
{
    unsigned sum = 0;

    m[0] = from;
    m[1] = seq;
    for (int i = 2; i < WORDS - 1; i++)
        m[i] = from * 100003 + seq * 31 + i;
    for (int i = 0; i < WORDS - 1; i++)
        sum = sum * 33 + (unsigned)m[i];
    m[WORDS - 1] = (int)sum;
}

static int intact(const int *m)
{
    int copy[WORDS];

    if (m[0] < 1 || m[0] >= NP || m[1] < 0 || m[1] >= NMSG)
        return 0;
    fill(copy, m[0], m[1]);
    return memcmp(copy, m, sizeof copy) == 0;
}

static int next_seq[NP], bad_msgs, dup_or_gap;

static void take(const int *m, const MPI_Status *st)
{
    if (!intact(m) || st->MPI_SOURCE != m[0]) {
        bad_msgs++;
        return;
    }
    if (m[1] != next_seq[m[0]])
        dup_or_gap++;
    next_seq[m[0]] = m[1] + 1;
}

/* Workers 1 and 2 sent their first halves (they wait for "go"). */
static int first_halves(void)
{
    return next_seq[1] >= NMSG / 2 && next_seq[2] >= NMSG / 2;
}

static void master(void)
{
    int buf[WORDS], rc, flag = 0, v[WORDS], posted = 0, odd = 0;
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Status st;
    double t0;

    /* Messages until the pending receive reports the failure. */
    step = "wildcard receives until the failure";
    for (;;) {
        rc = MPI_Irecv(buf, WORDS, MPI_INT, MPI_ANY_SOURCE, TAG_WORK,
                       MPI_COMM_WORLD, &req);
        if (rc != MPI_SUCCESS) {
            chk(0, "MPI_Irecv before the failure: %s",
                class_name(class_of(rc)));
            return;
        }
        rc = MPI_Wait(&req, &st);
        if (rc != MPI_SUCCESS)
            break;
        take(buf, &st);
    }
    chk(rc == MPIX_ERR_PROC_FAILED_PENDING && req != MPI_REQUEST_NULL,
        "MPI_Wait on the pending wildcard: rc == MPIX_ERR_PROC_FAILED_PENDING "
        "(got %d, %s), request still pending", rc, class_name(class_of(rc)));
    if (req == MPI_REQUEST_NULL)
        return;

    /* Not yet acknowledged: the pending request still takes messages
     * that arrive (the first halves may be in flight), and a new wildcard
     * receive is posted each time. */
    step = "wildcard receives before the acknowledgement";
    t0 = MPI_Wtime();
    while (!first_halves() && MPI_Wtime() - t0 < BOUND) {
        rc = MPI_Test(&req, &flag, &st);
        if (rc == MPI_SUCCESS && flag) {
            take(buf, &st);
            rc = MPI_Irecv(buf, WORDS, MPI_INT, MPI_ANY_SOURCE, TAG_WORK,
                           MPI_COMM_WORLD, &req);
            posted++;
            if (rc != MPI_SUCCESS || req == MPI_REQUEST_NULL) {
                chk(0, "new MPI_Irecv(MPI_ANY_SOURCE) before the "
                    "acknowledgement is posted (got %s)",
                    class_name(class_of(rc)));
                return;
            }
        } else if (rc != MPIX_ERR_PROC_FAILED_PENDING || flag) {
            odd++;
        }
    }
    chk(first_halves() && odd == 0, "before the acknowledgement the pending "
        "request took the messages in flight (%d new requests posted), "
        "else reported MPIX_ERR_PROC_FAILED_PENDING (%d other results)",
        posted, odd);
    t0 = MPI_Wtime();
    flag = -1;
    rc = MPI_Test(&req, &flag, &st);
    chk(rc == MPIX_ERR_PROC_FAILED_PENDING && flag == 0 &&
        req != MPI_REQUEST_NULL, "MPI_Test on it, nothing left to take: "
        "rc == MPIX_ERR_PROC_FAILED_PENDING (got %s), flag 0 (got %d)",
        class_name(class_of(rc)), flag);
    rc = MPI_Recv(v, WORDS, MPI_INT, MPI_ANY_SOURCE, TAG_WORK,
                  MPI_COMM_WORLD, &st);
    chk(rc == MPIX_ERR_PROC_FAILED, "blocking MPI_Recv(MPI_ANY_SOURCE) "
        "before the acknowledgement: rc == MPIX_ERR_PROC_FAILED (got %s)",
        class_name(class_of(rc)));
    chk_time(MPI_Wtime() - t0, AT_ONCE, "the two calls");

    /* Acknowledged: the request completes with a message, and the loop
     * goes on until workers 1 and 2 are done. */
    step = "wildcard receives after the acknowledgement";
    rc = MPIX_Comm_failure_ack(MPI_COMM_WORLD);
    chk(rc == MPI_SUCCESS, "MPIX_Comm_failure_ack: %s",
        class_name(class_of(rc)));
    for (int r = 1; r < NSURV; r++)
        MPI_Send(&r, 1, MPI_INT, r, TAG_GO, MPI_COMM_WORLD);
    rc = MPI_Wait(&req, &st);
    if (!chk(rc == MPI_SUCCESS, "MPI_Wait on the pending wildcard request "
             "after the acknowledgement: %s", class_name(class_of(rc))))
        return;
    take(buf, &st);
    while (next_seq[1] < NMSG || next_seq[2] < NMSG) {
        rc = MPI_Irecv(buf, WORDS, MPI_INT, MPI_ANY_SOURCE, TAG_WORK,
                       MPI_COMM_WORLD, &req);
        if (rc == MPI_SUCCESS)
            rc = MPI_Wait(&req, &st);
        if (rc != MPI_SUCCESS) {
            chk(0, "wildcard receive after the acknowledgement: %s",
                class_name(class_of(rc)));
            return;
        }
        take(buf, &st);
    }
    chk(next_seq[1] == NMSG && next_seq[2] == NMSG && dup_or_gap == 0 &&
        bad_msgs == 0, "workers 1 and 2: %d and %d of %d messages, each "
        "once, in order, intact (%d out of order, %d damaged)", next_seq[1],
        next_seq[2], NMSG, dup_or_gap, bad_msgs);
    chk(next_seq[VICTIM] <= NVICTIM, "worker 3: a prefix of its messages "
        "(%d of %d)", next_seq[VICTIM], NVICTIM);
}

static void worker(void)
{
    int m[WORDS], go, ok = 1;

    step = "worker sends";
    for (int s = 0; s < NMSG; s++) {
        if (s == NMSG / 2)
            ok &= MPI_Recv(&go, 1, MPI_INT, 0, TAG_GO, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE) == MPI_SUCCESS;
        fill(m, rank, s);
        ok &= MPI_Send(m, WORDS, MPI_INT, 0, TAG_WORK, MPI_COMM_WORLD) ==
              MPI_SUCCESS;
    }
    chk(ok, "worker %d: every send and the go receive succeeded", rank);
}

int main(int argc, char **argv)
{
    static const int surv[NSURV] = { 0, 1, 2 };

    if (!setup(&argc, &argv))
        return 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == VICTIM) {
        int m[WORDS];

        for (int s = 0; s < NVICTIM; s++) {
            fill(m, rank, s);
            MPI_Send(m, WORDS, MPI_INT, 0, TAG_WORK, MPI_COMM_WORLD);
        }
        victim();
    }
    watchdog_start(BOUND + 20);
    if (rank == 0)
        master();
    else
        worker();
    return finish(surv, NSURV);
}
