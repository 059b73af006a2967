/* ftw-test: np=4 mode=ftwrap timeout=150 link=ftwrap expect-failed=1,3 fate=1:signal:KILL fate=3:signal:KILL */
/*
 * thread_stress - MPI_THREAD_MULTIPLE under failures, validate and drain.
 *
 * Every rank runs 4 worker threads and a control thread (main).  Worker t
 * loops over rounds on a duplicate of MPI_COMM_WORLD, tag 100 + t: it
 * sends one message to the next rank it believes alive and receives one
 * from MPI_ANY_SOURCE, with the receive made four ways in turn: Irecv +
 * Waitall, Iprobe + Recv, Improbe + Mrecv, blocking Recv.  Sizes run from
 * 64 B to 1 MiB + 3 (the large ones through ftwrap's own
 * rendezvous).  Each message names its sender, thread, a per-sender
 * sequence number and a seed; the payload is the seed's pattern.
 * The control thread, every 100 ms, calls FTW_Comm_validate or
 * FTW_Comm_drain_all on that communicator while the workers run; rank 3
 * SIGKILLs itself at step 3 and rank 1 at step 7, in the middle of the
 * workers' traffic and the others' validates and drains.  Workers take
 * FTW_ERR_PROC_FAIL_STOP (the peer is marked dead), FTW_ERR_DRAINED
 * (round abandoned), FTW_ERR_ANY_SOURCE_DISABLED (acknowledged with
 * FTW_Comm_reenable_any_source from the worker, then waited again) and
 * FTW_ERR_BUFFER_UNUSABLE (a cut receive the MPI may still write: the
 * buffer is left to ftwrap's quarantine and a new one taken).
 * After the steps the workers go on (validates, at most 4 s more) until
 * every survivor has received traffic after both deaths, which a loaded
 * host may delay.
 * At the end the control thread sets a stop flag and drains until every
 * worker has left (MPIX_Comm_agree on a second communicator decides when).
 *
 * Asserts, over the survivors 0 and 2 after a final validate:
 *  - MPI_Init_thread granted MPI_THREAD_MULTIPLE (else skipped);
 *  - every received payload intact and its length right;
 *  - per (sender, thread) the sequence numbers strictly increase (no
 *    duplicate, no overtaking);
 *  - no error outside the classes above, every validate and drain
 *    MPI_SUCCESS;
 *  - traffic flowed between the survivors after both deaths were known;
 *  - ftwrap's own rendezvous carried large messages on every survivor
 *    (FTW_Stat_get: rendezvous pulls), MPI_THREAD_MULTIPLE notwithstanding;
 *  - the final validate gives {1, 3} everywhere;
 *  - bounded time (the runner's timeout), nothing left behind (runner).
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftwrap.h"
#include "tap.h"

#define NP 4
#define NT 4
#define TAG0 100
#ifndef STEP_US
#define STEP_US 100000  /* between the control thread's validates and drains */
#endif
#define NSTEP (1200000 / STEP_US)
#define EXTRA_STEPS 40  /* at most, waiting for traffic after both deaths */
#define EXTRA_US 100000
#define KILL3_STEP (300000 / STEP_US)
#define KILL1_STEP (700000 / STEP_US)
#define MAXLEN ((1 << 20) + 3)

typedef struct {
    int src, thread;
    uint64_t seq, seed;
    int len;
} hdr_t;

static MPI_Comm wc, ctl;
static int rank, size;
static atomic_int dead[NP];
static atomic_int ndead_known;
static atomic_int stop, gen, done_workers;

/* Results, per rank, summed at the end. */
static atomic_long n_recv, n_recv_late, n_bad, n_order, n_unexpected;
static atomic_long n_drained, n_failed, n_disabled, n_quarantined;
static __thread int rbuf_quarantined;

static const int sizes[] = { 64, 4096, 65536, (256 << 10) + 17, MAXLEN };

static int cls_of(int rc)
{
    int cls = MPI_ERR_OTHER;

    if (rc == MPI_SUCCESS)
        return MPI_SUCCESS;
    MPI_Error_class(rc, &cls);
    return cls;
}

static void unexpected(int t, const char *what, int rc)
{
    char msg[MPI_MAX_ERROR_STRING];
    int n = 0;

    MPI_Error_string(rc, msg, &n);
    tap_diag("rank %d thread %d: %s: unexpected %s", rank, t, what, msg);
    n_unexpected++;
}

static void mark_dead(int r)
{
    if (r >= 0 && r < NP && r != rank && !atomic_exchange(&dead[r], 1))
        ndead_known++;
}

/* The ranks in wc of group g's members into out[]; their number. */
static int group_ranks(MPI_Group g, int out[NP])
{
    MPI_Group wg;
    int n = 0, in[NP];

    MPI_Group_size(g, &n);
    if (n > NP)
        n = NP;
    MPI_Comm_group(wc, &wg);
    for (int i = 0; i < n; i++)
        in[i] = i;
    MPI_Group_translate_ranks(g, n, in, wg, out);
    MPI_Group_free(&wg);
    return n;
}

static void mark_group(MPI_Group g)
{
    int out[NP], n = group_ranks(g, out);

    for (int i = 0; i < n; i++)
        mark_dead(out[i]);
}

static int right_of(void)
{
    for (int i = 1; i < size; i++) {
        int r = (rank + i) % size;

        if (!dead[r])
            return r;
    }
    return MPI_PROC_NULL;
}

static void acknowledge(void)
{
    MPI_Group g;

    if (FTW_Comm_reenable_any_source(wc, &g) == MPI_SUCCESS) {
        mark_group(g);
        MPI_Group_free(&g);
    }
}

/*
 * Wait for one request to end.  Returns 1 if it completed with data
 * (status filled), 0 if it ended in an expected error.
 */
static int wait_one(int t, MPI_Request *req, MPI_Status *st, int is_send,
                    int peer)
{
    for (;;) {
        int rc = MPI_Wait(req, st), cls = cls_of(rc);

        if (cls == MPI_SUCCESS)
            return 1;
        if (cls == FTW_ERR_ANY_SOURCE_DISABLED && *req != MPI_REQUEST_NULL) {
            n_disabled++;
            acknowledge();
            if (stop)
                usleep(1000);
            continue;
        }
        if (cls == FTW_ERR_PROC_FAIL_STOP) {
            n_failed++;
            if (is_send)
                mark_dead(peer);
            else
                acknowledge();
            return 0;
        }
        if (cls == FTW_ERR_DRAINED) {
            n_drained++;
            return 0;
        }
        if (cls == FTW_ERR_BUFFER_UNUSABLE && !is_send) {
            n_quarantined++;
            rbuf_quarantined = 1;
            return 0;
        }
        unexpected(t, is_send ? "wait(send)" : "wait(recv)", rc);
        return 0;
    }
}

/* The thread's last receives, shown when one arrives out of order. */
#define NHIST 16

static __thread struct {
    int src, kind, count, gen;
    uint64_t seq;
    double t;
} hist[NHIST];
static __thread unsigned nhist;

static void history_add(int src, uint64_t seq, int kind, int count)
{
    unsigned i = nhist++ % NHIST;

    hist[i].src = src;
    hist[i].seq = seq;
    hist[i].kind = kind;
    hist[i].count = count;
    hist[i].gen = gen;
    hist[i].t = MPI_Wtime();
}

static void history_dump(int t)
{
    for (unsigned i = nhist > NHIST ? nhist - NHIST : 0; i < nhist; i++)
        tap_diag("rank %d thread %d: earlier: from %d seq %llu kind %d "
                 "%d bytes generation %d at %.6f", rank, t,
                 hist[i % NHIST].src,
                 (unsigned long long)hist[i % NHIST].seq,
                 hist[i % NHIST].kind, hist[i % NHIST].count,
                 hist[i % NHIST].gen, hist[i % NHIST].t);
}

static void check_msg(int t, int kind, const unsigned char *buf, int count,
                      uint64_t last[NP][NT])
{
    hdr_t h;

    if (count < (int)sizeof(h)) {
        n_bad++;
        tap_diag("rank %d thread %d: message of %d bytes", rank, t, count);
        return;
    }
    memcpy(&h, buf, sizeof(h));
    if (h.len != count || h.src < 0 || h.src >= NP || h.thread != t ||
        !tap_check(buf + sizeof(h), count - sizeof(h), h.seed)) {
        n_bad++;
        tap_diag("rank %d thread %d: bad message (src %d thread %d len %d "
                 "count %d, receive kind %d)", rank, t, h.src, h.thread, h.len,
                 count, kind);
        return;
    }
    if (h.seq <= last[h.src][t]) {
        n_order++;
        tap_diag("rank %d thread %d: from %d seq %llu after %llu (receive "
                 "kind %d, %d bytes, drain generation %d)", rank, t, h.src,
                 (unsigned long long)h.seq,
                 (unsigned long long)last[h.src][t], kind, count, gen);
        history_dump(t);
    }
    history_add(h.src, h.seq, kind, count);
    last[h.src][t] = h.seq;
    n_recv++;
    if (ndead_known == 2)
        n_recv_late++;
}

static void *worker(void *arg)
{
    int t = (int)(long)arg, tag = TAG0 + t;
    unsigned char *sbuf = malloc(MAXLEN), *rbuf = malloc(MAXLEN);
    uint64_t seq = 0, last[NP][NT];

    memset(last, 0, sizeof(last));
    for (long r = 0; !stop; r++) {
        int len = sizes[(r + t) % 5], kind = (int)((r / 5 + t) % 4);
        int right = right_of(), g0 = gen, got = 0, count = 0, rc, flag = 0;
        MPI_Request sreq = MPI_REQUEST_NULL, rreq = MPI_REQUEST_NULL;
        MPI_Status st;
        MPI_Message msg;
        hdr_t h = { rank, t, ++seq, 0, len };

        if (right == MPI_PROC_NULL)
            break;
        h.seed = ((uint64_t)rank << 40) ^ ((uint64_t)t << 32) ^ seq;
        memcpy(sbuf, &h, sizeof(h));
        tap_fill(sbuf + sizeof(h), len - sizeof(h), h.seed);
        /* A receive that reports data it did not write shows. */
        memset(rbuf, 0xee, sizeof(h));
        if (kind == 0) {
            rc = MPI_Irecv(rbuf, MAXLEN, MPI_BYTE, MPI_ANY_SOURCE, tag, wc,
                           &rreq);
            if (cls_of(rc) == FTW_ERR_BUFFER_UNUSABLE) {
                n_quarantined++;
                rbuf_quarantined = 1;
            } else if (rc != MPI_SUCCESS) {
                if (cls_of(rc) != FTW_ERR_ANY_SOURCE_DISABLED &&
                    cls_of(rc) != FTW_ERR_PROC_FAIL_STOP)
                    unexpected(t, "irecv", rc);
                acknowledge();
            }
        }
        rc = MPI_Isend(sbuf, len, MPI_BYTE, right, tag, wc, &sreq);
        if (cls_of(rc) == FTW_ERR_PROC_FAIL_STOP) {
            n_failed++;
            mark_dead(right);
        } else if (rc != MPI_SUCCESS) {
            unexpected(t, "isend", rc);
        }
        switch (kind) {
        case 0:
            if (rreq != MPI_REQUEST_NULL &&
                wait_one(t, &rreq, &st, 0, MPI_ANY_SOURCE)) {
                MPI_Get_count(&st, MPI_BYTE, &count);
                got = 1;
            }
            break;
        case 1:
        case 2:
            while (!flag && !stop && gen == g0) {
                if (kind == 1)
                    rc = MPI_Iprobe(MPI_ANY_SOURCE, tag, wc, &flag, &st);
                else
                    rc = MPI_Improbe(MPI_ANY_SOURCE, tag, wc, &flag, &msg,
                                     &st);
                if (rc != MPI_SUCCESS) {
                    int c = cls_of(rc);

                    if (c != FTW_ERR_ANY_SOURCE_DISABLED &&
                        c != FTW_ERR_PROC_FAIL_STOP && c != FTW_ERR_DRAINED)
                        unexpected(t, "probe", rc);
                    acknowledge();
                    flag = 0;
                    usleep(200);
                }
            }
            if (!flag)
                break;
            MPI_Get_count(&st, MPI_BYTE, &count);
            if (kind == 1)
                rc = MPI_Recv(rbuf, MAXLEN, MPI_BYTE, st.MPI_SOURCE, tag, wc,
                              &st);
            else
                rc = MPI_Mrecv(rbuf, MAXLEN, MPI_BYTE, &msg, &st);
            if (rc == MPI_SUCCESS) {
                int c2 = 0;

                MPI_Get_count(&st, MPI_BYTE, &c2);
                if (kind == 2 && c2 != count) {
                    n_bad++;
                    tap_diag("rank %d thread %d: mrecv %d bytes, probed %d",
                             rank, t, c2, count);
                }
                count = c2;
                got = 1;
            } else if (cls_of(rc) == FTW_ERR_DRAINED) {
                n_drained++;
            } else if (cls_of(rc) == FTW_ERR_PROC_FAIL_STOP) {
                n_failed++;
            } else if (cls_of(rc) == FTW_ERR_BUFFER_UNUSABLE) {
                n_quarantined++;
                rbuf_quarantined = 1;
            } else {
                unexpected(t, kind == 1 ? "recv" : "mrecv", rc);
            }
            break;
        case 3:
            for (;;) {
                rc = MPI_Recv(rbuf, MAXLEN, MPI_BYTE, MPI_ANY_SOURCE, tag, wc,
                              &st);
                if (rc == MPI_SUCCESS) {
                    MPI_Get_count(&st, MPI_BYTE, &count);
                    got = 1;
                    break;
                }
                int c = cls_of(rc);

                if (c == FTW_ERR_DRAINED) {
                    n_drained++;
                    break;
                }
                if (c == FTW_ERR_BUFFER_UNUSABLE) {
                    n_quarantined++;
                    rbuf_quarantined = 1;
                    break;
                }
                if (c != FTW_ERR_PROC_FAIL_STOP &&
                    c != FTW_ERR_ANY_SOURCE_DISABLED) {
                    unexpected(t, "recv(any)", rc);
                    break;
                }
                n_failed++;
                acknowledge();
                if (stop)
                    break;
                usleep(1000);
            }
            break;
        }
        if (got)
            check_msg(t, kind, rbuf, count, last);
        if (sreq != MPI_REQUEST_NULL)
            wait_one(t, &sreq, &st, 1, right);
        if (rbuf_quarantined) {
            /* A failed transfer may still write it: left to ftwrap's
             * quarantine (never freed here), a new one taken. */
            rbuf = malloc(MAXLEN);
            rbuf_quarantined = 0;
            if (rbuf == NULL)
                break;
        }
    }
    free(sbuf);
    if (rbuf != NULL && !rbuf_quarantined)
        free(rbuf);
    done_workers++;
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t th[NT];
    int provided = 0, bad_calls = 0, failed_ok = 0;
    long res[9], sum[9];

    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (!tap_need_size(NP))
        return 0;
    if (provided != MPI_THREAD_MULTIPLE) {
        if (rank == 0)
            printf("1..0 # SKIP MPI_THREAD_MULTIPLE not granted\n");
        /* The victims must still die: the runner expects it. */
        if (rank == 1 || rank == 3)
            raise(SIGKILL);
        MPI_Finalize();
        return 0;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &wc);
    MPI_Comm_dup(MPI_COMM_WORLD, &ctl);
    MPI_Comm_set_errhandler(wc, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(ctl, MPI_ERRORS_RETURN);
    for (int t = 0; t < NT; t++)
        pthread_create(&th[t], NULL, worker, (void *)(long)t);

    for (int i = 0; i < NSTEP; i++) {
        MPI_Group g;
        int rc;

        usleep(STEP_US);
        if ((rank == 3 && i == KILL3_STEP) || (rank == 1 && i == KILL1_STEP))
            raise(SIGKILL);
        if (i % 2 == 0) {
            rc = FTW_Comm_validate(wc, &g);
            if (rc == MPI_SUCCESS) {
                mark_group(g);
                MPI_Group_free(&g);
            }
        } else {
            rc = FTW_Comm_drain_all(wc);
            gen++;
        }
        if (rc != MPI_SUCCESS) {
            bad_calls++;
            unexpected(-1, i % 2 == 0 ? "validate" : "drain", rc);
        }
    }

    /* Traffic between the survivors after both deaths is checked below;
     * on a loaded host the steps above may end before any came, so the
     * workers go on, a validate per step (at most EXTRA_STEPS more),
     * until every survivor has received some. */
    for (int n = 0, late = 0; !late && n < EXTRA_STEPS; n++) {
        MPI_Group g;
        int rc;

        usleep(EXTRA_US);
        rc = FTW_Comm_validate(wc, &g);
        if (rc == MPI_SUCCESS) {
            mark_group(g);
            MPI_Group_free(&g);
        } else {
            bad_calls++;
            unexpected(-1, "validate", rc);
        }
        late = ndead_known == 2 && n_recv_late > 0;
        rc = MPIX_Comm_agree(ctl, &late);
        if (rc != MPI_SUCCESS && cls_of(rc) != FTW_ERR_PROC_FAIL_STOP) {
            bad_calls++;
            unexpected(-1, "agree", rc);
        }
    }

    /* Stop: drain until every worker of every survivor has left. */
    stop = 1;
    for (int all = 0, n = 0; !all; n++) {
        int rc = FTW_Comm_drain_all(wc);

        gen++;
        if (rc != MPI_SUCCESS) {
            bad_calls++;
            unexpected(-1, "final drain", rc);
        }
        usleep(20000);
        all = done_workers == NT;
        rc = MPIX_Comm_agree(ctl, &all);
        if (rc != MPI_SUCCESS && cls_of(rc) != FTW_ERR_PROC_FAIL_STOP) {
            bad_calls++;
            unexpected(-1, "agree", rc);
        }
        if (n > 500) {
            tap_diag("rank %d: workers still running after %d drains", rank,
                     n);
            break;
        }
    }
    for (int t = 0; t < NT; t++)
        pthread_join(th[t], NULL);

    {
        MPI_Group g;
        int n, out[NP], rc;

        rc = FTW_Comm_validate(wc, &g);
        if (rc == MPI_SUCCESS) {
            n = group_ranks(g, out);
            failed_ok = n == 2 && ((out[0] == 1 && out[1] == 3) ||
                                   (out[0] == 3 && out[1] == 1));
            MPI_Group_free(&g);
        } else {
            bad_calls++;
            unexpected(-1, "final validate", rc);
        }
    }

    res[0] = n_bad;
    res[1] = n_order;
    res[2] = n_unexpected;
    res[3] = bad_calls;
    res[4] = !failed_ok;
    res[5] = n_recv_late > 0 ? 0 : 1;
    res[6] = n_recv;
    res[7] = n_drained + n_failed + n_disabled + n_quarantined;
    {
        /* Messages of 256 KiB + 17 and 1 MiB + 3 went through ftwrap's
         * own rendezvous (on by default from 128 KiB): pulled here. */
        unsigned long long cma = 0, shm = 0, verbs = 0;

        FTW_Stat_get("rndv_cma", &cma);
        FTW_Stat_get("rndv_shm", &shm);
        FTW_Stat_get("rndv_verbs", &verbs);
        res[8] = cma + shm + verbs == 0;
        tap_diag("rank %d: rendezvous pulls: cma %llu, shm %llu, verbs %llu",
                 rank, cma, shm, verbs);
    }
    tap_diag("rank %d: received %ld (%ld after both deaths), drained %ld, "
             "failed %ld, disabled %ld, buffer quarantined %ld", rank,
             (long)n_recv, (long)n_recv_late, (long)n_drained, (long)n_failed,
             (long)n_disabled, (long)n_quarantined);
    if (MPI_Reduce(res, sum, 9, MPI_LONG, MPI_SUM, 0, wc) != MPI_SUCCESS) {
        tap_diag("rank %d: MPI_Reduce over the survivors failed", rank);
        memset(sum, 0xff, sizeof(sum));
    }
    if (rank == 0) {
        tap_plan(8);
        tap_ok_local(sum[0] == 0, "every received payload intact (%ld bad)",
                     sum[0]);
        tap_ok_local(sum[1] == 0, "per sender and thread the sequence "
                     "increases (%ld out of order)", sum[1]);
        tap_ok_local(sum[2] == 0, "no unexpected error (%ld)", sum[2]);
        tap_ok_local(sum[3] == 0, "every validate, drain and agree "
                     "MPI_SUCCESS (%ld not)", sum[3]);
        tap_ok_local(sum[4] == 0, "the final validate gives {1,3} on every "
                     "survivor");
        tap_ok_local(sum[5] == 0, "traffic between the survivors after both "
                     "deaths were known");
        tap_ok_local(sum[6] > 0, "messages received: %ld, ended in error: "
                     "%ld", sum[6], sum[7]);
        tap_ok_local(sum[8] == 0, "ftwrap's rendezvous pulled messages on "
                     "every survivor under MPI_THREAD_MULTIPLE");
    }
    MPI_Comm_free(&ctl);
    MPI_Comm_free(&wc);
    MPI_Finalize();
    return tap_status();
}
