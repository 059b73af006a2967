/*
 * ftcheck.h - what the drain and interrupt failure tests share.
 *
 * After a process failure collectives are off, so each survivor keeps its
 * own list of checks (chk, chk_class, chk_time, chk_data) and report()
 * sends the lists point-to-point to the lowest survivor, which prints TAP
 * (plan at the end).  A watchdog thread names the step a stuck survivor
 * is in and ends it, so a hang fails fast with the step in the log.
 * The traffic_after_drain() checks: point-to-point among the survivors
 * with the application's rank numbers, status.MPI_SOURCE from every
 * completion and probe call, and the failed ranks refused at once.
 *
 * Each test defines NP before including this header.
 */
#ifndef FTW_FTCHECK_H
#define FTW_FTCHECK_H

#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ftwrap.h"
#include "tap.h"

#define BOUND 5.0            /* seconds a call may take after the kill */
#define AT_ONCE 1.0          /* seconds for a call that must fail at once */
#define KILL_DELAY_US 200000 /* victim: from the barrier to its death */
#define NO_MSG_US 200000     /* how long "nothing arrives" is watched */
#define BIG (1 << 20)

/* ---- checks, reported to the lowest survivor ----------------------------- */

#define TAG_RESULT 90

static int rank;

#define CLS(rc) class_name(class_of(rc))

/* rc must be of class want (MPI_SUCCESS included). */
static inline int chk_class(int rc, int want, const char *what)
{
    int cls = class_of(rc);

    return chk(cls == want, "%s: %s (got %s)", what, class_name(want),
               class_name(cls));
}

static inline int chk_time(double t, double bound, const char *what)
{
    return chk(t < bound, "%s: returned in %.3f s (bound %.1f s)", what, t,
               bound);
}

/* The world ranks of group g, as a bit mask (g must be of world's
 * processes); -1 if the translation fails. */
static inline int world_mask_of(MPI_Group g, int *size_out)
{
    MPI_Group world;
    int n = -1, in[64], out[64], mask = 0;

    if (MPI_Group_size(g, &n) != MPI_SUCCESS || n < 0 || n > 64)
        return -1;
    *size_out = n;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    for (int i = 0; i < n; i++)
        in[i] = i;
    if (n > 0 && MPI_Group_translate_ranks(g, n, in, world, out)
                 != MPI_SUCCESS)
        mask = -1;
    for (int i = 0; mask >= 0 && i < n; i++) {
        if (out[i] < 0 || out[i] >= 31)
            mask = -1;
        else
            mask |= 1 << out[i];
    }
    MPI_Group_free(&world);
    return mask;
}

static inline const char *mask_str(int mask)
{
    static char buf[4][48];
    static int next;
    char *b = buf[next++ % 4];
    size_t len = 0;

    if (mask < 0)
        return "(untranslatable)";
    b[len++] = '{';
    for (int r = 0; r < 31; r++)
        if (mask & (1 << r))
            len += (size_t)snprintf(b + len, sizeof buf[0] - len, "%s%d",
                                    len > 1 ? "," : "", r);
    snprintf(b + len, sizeof buf[0] - len, "}");
    return b;
}

/* Poll until this process knows that the world ranks in mask failed. */
static inline int wait_known(int mask, double bound)
{
    double t0 = MPI_Wtime();
    int got = 0, n = 0;

    for (;;) {
        MPI_Group g;

        if (FTW_Comm_group_failed(MPI_COMM_WORLD, &g) == MPI_SUCCESS) {
            got = world_mask_of(g, &n);
            MPI_Group_free(&g);
        }
        if (got >= 0 && (got & mask) == mask)
            break;
        if (MPI_Wtime() - t0 > bound)
            break;
        usleep(1000);
    }
    return chk(got >= 0 && (got & mask) == mask,
               "failure of %s known within %.0f s (knows %s after %.3f s)",
               mask_str(mask), bound, mask_str(got), MPI_Wtime() - t0);
}

/* A survivor stuck in a call says where (the step, and its threads'
 * stacks) and leaves: the job then fails quickly, with both in the log,
 * instead of timing out. */
static const char *volatile step = "start";
static double watchdog_seconds;

static inline void *watchdog(void *arg)
{
    (void)arg;
    usleep((useconds_t)(watchdog_seconds * 1e6));
    fprintf(stderr, "# [rank %d] WATCHDOG: still in \"%s\" after %.0f s; "
            "its stacks:\n", rank, step, watchdog_seconds);
    fflush(stdout);
    tap_stacks();
    fflush(stderr);
    _exit(3);
    return NULL;
}

static inline void watchdog_start(double seconds)
{
    pthread_t t;

    watchdog_seconds = seconds;
    if (pthread_create(&t, NULL, watchdog, NULL) == 0)
        pthread_detach(t);
}

/* The survivors surv[0..nsurv) send their checks to surv[0], which prints
 * TAP (plan at the end).  Returns 1 if every check held everywhere (on
 * surv[0]) or here (elsewhere). */
static inline int report(const int *surv, int nsurv)
{
    int me = surv[0], count = 0, failed = 0;

    step = "report";
    if (rank != me) {
        if (MPI_Send(&nchk, 1, MPI_INT, me, TAG_RESULT, MPI_COMM_WORLD) ||
            MPI_Send(chks, nchk * (int)sizeof(chk_t), MPI_BYTE, me,
                     TAG_RESULT, MPI_COMM_WORLD))
            tap_diag("cannot send my verdicts to rank %d", me);
        return nchk_failed == 0;
    }
    for (int k = 0; k < nsurv; k++) {
        chk_t theirs[MAXCHK], *list = chks;
        int r = surv[k], n = nchk, rc = MPI_SUCCESS;

        if (r != me) {
            list = theirs;
            rc = MPI_Recv(&n, 1, MPI_INT, r, TAG_RESULT, MPI_COMM_WORLD,
                          MPI_STATUS_IGNORE);
            if (rc == MPI_SUCCESS && (n < 0 || n > MAXCHK))
                rc = MPI_ERR_COUNT;
            if (rc == MPI_SUCCESS)
                rc = MPI_Recv(theirs, n * (int)sizeof(chk_t), MPI_BYTE, r,
                              TAG_RESULT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            count++;
            if (rc != MPI_SUCCESS || n <= 0) {
                failed++;
                printf("not ok %d - rank %d reported %d verdicts\n", count,
                       r, n);
                continue;
            }
            printf("ok %d - rank %d reported %d verdicts\n", count, r, n);
        }
        for (int i = 0; i < n; i++) {
            list[i].what[sizeof list[i].what - 1] = '\0';
            count++;
            failed += !list[i].ok;
            printf("%sok %d - rank %d: %s\n", list[i].ok ? "" : "not ",
                   count, r, list[i].what);
        }
    }
    printf("1..%d\n", count);
    fflush(stdout);
    return failed == 0 && nchk_failed == 0;
}

/* The end of a survivor: MPI_Finalize must return despite the failure. */
static inline int finish(const int *surv, int nsurv)
{
    int ok = report(surv, nsurv), rc;

    step = "MPI_Finalize";
    fflush(stdout);
    rc = MPI_Finalize();
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "# [rank %d] MPI_Finalize returned %d\n", rank, rc);
        return 1;
    }
    return ok ? 0 : 1;
}

/* Sleep us microseconds, through signals (usleep returns early on one,
 * and ftwrap's failure detector may send some). */
static inline void sleep_us(long us)
{
    struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

    while (nanosleep(&ts, &ts) != 0)
        ;
}

static inline void victim(void)
{
    fflush(stdout);
    fflush(stderr);
    sleep_us(KILL_DELAY_US);
    raise(SIGKILL);
    _exit(99); /* not reached */
}

/* MPI_Init and the size check; returns 0 if the test is to be skipped. */
static inline int setup(int *argc, char ***argv)
{
    int size;

    MPI_Init(argc, argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != NP) {
        if (rank == 0)
            printf("1..0 # SKIP needs %d ranks\n", NP);
        MPI_Finalize();
        return 0;
    }
    return 1;
}

/* ---- checksummed messages ------------------------------------------------
 * A message's pattern seed names its sender, receiver, purpose and size,
 * so a message matched by the wrong receive (an old one that a drain was
 * to discard, say) fails its checksum. */

static inline uint64_t seed_of(int from, int to, int what, size_t len)
{
    return ((uint64_t)(from + 1) << 48) ^ ((uint64_t)(to + 1) << 40) ^
           ((uint64_t)(what + 1) << 24) ^ (uint64_t)len;
}

static inline void *xmalloc(size_t len)
{
    void *p = malloc(len);

    if (p == NULL) {
        fprintf(stderr, "# [rank %d] out of memory\n", rank);
        _exit(4);
    }
    return p;
}

/* A received message: rc success, count len bytes, pattern of seed. */
static inline int chk_data(int rc, const MPI_Status *st, const void *buf,
                           size_t len, uint64_t seed, const char *what)
{
    int count = -1, ok;

    if (rc == MPI_SUCCESS && st != MPI_STATUS_IGNORE)
        MPI_Get_count(st, MPI_BYTE, &count);
    else if (rc == MPI_SUCCESS)
        count = (int)len;
    ok = rc == MPI_SUCCESS && count == (int)len && tap_check(buf, len, seed);
    return chk(ok, "%s: %s, %d bytes (want %zu), checksum %s", what,
               CLS(rc), count, len,
               rc == MPI_SUCCESS && tap_check(buf, len, seed) ? "ok"
                                                              : "BAD");
}

/* Nothing from source (tag) shows up on comm within NO_MSG_US. */
static inline void chk_nothing(MPI_Comm comm, int source, int tag,
                               const char *what)
{
    double t0 = MPI_Wtime();
    MPI_Status st;
    int flag = 0, rc = MPI_SUCCESS;

    while (!flag && MPI_Wtime() - t0 < NO_MSG_US * 1e-6) {
        rc = MPI_Iprobe(source, tag, comm, &flag, &st);
        if (rc != MPI_SUCCESS)
            break;
        usleep(2000);
    }
    chk(rc == MPI_SUCCESS && !flag, "%s: MPI_Iprobe(%d, %d) for %.0f ms: "
        "%s, %s (source %d, tag %d)", what, source, tag, NO_MSG_US * 1e-3,
        CLS(rc), flag ? "FOUND A MESSAGE" : "nothing",
        flag ? st.MPI_SOURCE : -1, flag ? st.MPI_TAG : -1);
}

/* ---- point-to-point after a drain ----------------------------------------
 * The survivors surv[0..nsurv) (nsurv 3) talk with their own rank
 * numbers; dead[0..ndead) are refused at once.  Small messages (SMALL
 * bytes, the sender's rank in the first int) go to both other survivors
 * in rounds, one tag each, every round received through another call so
 * every status-returning call is checked for the sender's user rank. */

#define SMALL 64
#define TAG_ROUND 200
#define TAG_RING 300

static inline int idx_of(const int *surv, int nsurv, int r)
{
    for (int i = 0; i < nsurv; i++)
        if (surv[i] == r)
            return i;
    return -1;
}

/* The small message from `from` to `to` in round k. */
static inline void small_fill(void *buf, int from, int to, int k)
{
    tap_fill(buf, SMALL, seed_of(from, to, k, SMALL));
    memcpy(buf, &from, sizeof from);
}

static inline int small_ok(const void *buf, int from, int to, int k)
{
    unsigned char want[SMALL];

    small_fill(want, from, to, k);
    return memcmp(buf, want, SMALL) == 0;
}

static inline int small_sender(const void *buf)
{
    int s;

    memcpy(&s, buf, sizeof s);
    return s;
}

/* A small message received with status st must come from want (-1: any
 * of the two peers) and hold its data; returns the sender seen. */
static inline int chk_small(int rc, const MPI_Status *st, const void *buf, int k,
                     int want, const int *peer, const char *call)
{
    int src = rc == MPI_SUCCESS ? st->MPI_SOURCE : -99;
    int from = small_sender(buf), count = -1;
    int src_ok = want >= 0 ? src == want : (src == peer[0] || src == peer[1]);

    if (rc == MPI_SUCCESS)
        MPI_Get_count(st, MPI_BYTE, &count);
    chk(rc == MPI_SUCCESS && src_ok && st->MPI_TAG == TAG_ROUND + k &&
        count == SMALL && from == src && small_ok(buf, from, rank, k),
        "round %d, %s: %s, MPI_SOURCE %d (want %s%d), tag %d, %d bytes, "
        "sent by %d, checksum %s", k, call, CLS(rc), src,
        want >= 0 ? "" : "either peer, e.g. ", want >= 0 ? want : peer[0],
        rc == MPI_SUCCESS ? st->MPI_TAG : -1, count, from,
        rc == MPI_SUCCESS && small_ok(buf, from, rank, k) ? "ok" : "BAD");
    return src;
}

static inline void chk_both(int s0, int s1, const int *peer, int k, const char *call)
{
    chk((s0 == peer[0] && s1 == peer[1]) || (s0 == peer[1] && s1 == peer[0]),
        "round %d, %s: the two messages came from %d and %d (want %d and "
        "%d)", k, call, s0, s1, peer[0], peer[1]);
}

enum {
    R_RECV_ANY, R_PROBE_ANY, R_IPROBE, R_WAITALL, R_WAITANY, R_TESTSOME,
    R_IMPROBE, R_TEST, R_GET_STATUS, NROUNDS
};

/* Send this round's small messages to both peers. */
static inline void round_send(const int *peer, int k)
{
    unsigned char buf[SMALL];
    char what[64];

    for (int i = 0; i < 2; i++) {
        int rc;

        small_fill(buf, rank, peer[i], k);
        rc = MPI_Send(buf, SMALL, MPI_BYTE, peer[i], TAG_ROUND + k,
                      MPI_COMM_WORLD);
        snprintf(what, sizeof what, "round %d: MPI_Send to %d", k, peer[i]);
        if (rc != MPI_SUCCESS)
            chk_class(rc, MPI_SUCCESS, what);
    }
}

static inline void round_recv(const int *peer, int k)
{
    unsigned char b0[SMALL], b1[SMALL];
    MPI_Status st[2];
    MPI_Request rq[2];
    int rc, s0 = -1, s1 = -1, tag = TAG_ROUND + k, flag, idx, out, ind[2];
    double t0;

    memset(b0, 0, sizeof b0);
    memset(b1, 0, sizeof b1);
    switch (k) {
    case R_RECV_ANY:
        step = "MPI_Recv(MPI_ANY_SOURCE) after the drain";
        rc = MPI_Recv(b0, SMALL, MPI_BYTE, MPI_ANY_SOURCE, tag,
                      MPI_COMM_WORLD, &st[0]);
        s0 = chk_small(rc, &st[0], b0, k, -1, peer, "MPI_Recv(ANY_SOURCE)");
        rc = MPI_Recv(b1, SMALL, MPI_BYTE, MPI_ANY_SOURCE, tag,
                      MPI_COMM_WORLD, &st[1]);
        s1 = chk_small(rc, &st[1], b1, k, -1, peer, "MPI_Recv(ANY_SOURCE)");
        chk_both(s0, s1, peer, k, "MPI_Recv(ANY_SOURCE)");
        break;
    case R_PROBE_ANY:
        step = "MPI_Probe(MPI_ANY_SOURCE) after the drain";
        for (int i = 0; i < 2; i++) {
            unsigned char *b = i ? b1 : b0;
            int src;

            rc = MPI_Probe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &st[0]);
            src = rc == MPI_SUCCESS ? st[0].MPI_SOURCE : -99;
            chk(rc == MPI_SUCCESS && (src == peer[0] || src == peer[1]) &&
                st[0].MPI_TAG == tag, "round %d, MPI_Probe(ANY_SOURCE): "
                "%s, MPI_SOURCE %d (want %d or %d)", k, CLS(rc), src,
                peer[0], peer[1]);
            if (rc != MPI_SUCCESS || (src != peer[0] && src != peer[1]))
                src = peer[i];  /* receive something, not hang */
            rc = MPI_Recv(b, SMALL, MPI_BYTE, src, tag, MPI_COMM_WORLD,
                          &st[1]);
            *(i ? &s1 : &s0) = chk_small(rc, &st[1], b, k, src, peer,
                                         "MPI_Recv of the probed source");
        }
        chk_both(s0, s1, peer, k, "MPI_Probe(ANY_SOURCE)");
        break;
    case R_IPROBE:
        step = "MPI_Iprobe(peer) after the drain";
        for (int i = 0; i < 2; i++) {
            unsigned char *b = i ? b1 : b0;

            flag = 0;
            rc = MPI_SUCCESS;
            t0 = MPI_Wtime();
            while (!flag && rc == MPI_SUCCESS && MPI_Wtime() - t0 < BOUND)
                rc = MPI_Iprobe(peer[i], tag, MPI_COMM_WORLD, &flag, &st[0]);
            chk(rc == MPI_SUCCESS && flag && st[0].MPI_SOURCE == peer[i] &&
                st[0].MPI_TAG == tag, "round %d, MPI_Iprobe(%d): %s, flag "
                "%d, MPI_SOURCE %d", k, peer[i], CLS(rc), flag,
                flag ? st[0].MPI_SOURCE : -1);
            rc = MPI_Recv(b, SMALL, MPI_BYTE, peer[i], tag, MPI_COMM_WORLD,
                          &st[1]);
            *(i ? &s1 : &s0) = chk_small(rc, &st[1], b, k, peer[i], peer,
                                         "MPI_Recv(peer)");
        }
        break;
    case R_WAITALL:
        step = "MPI_Waitall after the drain";
        MPI_Irecv(b0, SMALL, MPI_BYTE, peer[0], tag, MPI_COMM_WORLD, &rq[0]);
        MPI_Irecv(b1, SMALL, MPI_BYTE, peer[1], tag, MPI_COMM_WORLD, &rq[1]);
        rc = MPI_Waitall(2, rq, st);
        chk_small(rc, &st[0], b0, k, peer[0], peer, "MPI_Waitall [0]");
        chk_small(rc, &st[1], b1, k, peer[1], peer, "MPI_Waitall [1]");
        break;
    case R_WAITANY:
        step = "MPI_Waitany after the drain";
        MPI_Irecv(b0, SMALL, MPI_BYTE, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD,
                  &rq[0]);
        MPI_Irecv(b1, SMALL, MPI_BYTE, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD,
                  &rq[1]);
        for (int i = 0; i < 2; i++) {
            idx = -1;
            rc = MPI_Waitany(2, rq, &idx, &st[0]);
            if (idx != 0 && idx != 1) {
                chk(0, "round %d, MPI_Waitany: %s, index %d", k, CLS(rc),
                    idx);
                break;
            }
            *(i ? &s1 : &s0) = chk_small(rc, &st[0], idx ? b1 : b0, k, -1,
                                         peer, "MPI_Waitany(ANY_SOURCE)");
        }
        chk_both(s0, s1, peer, k, "MPI_Waitany(ANY_SOURCE)");
        break;
    case R_TESTSOME:
        step = "MPI_Testsome after the drain";
        MPI_Irecv(b0, SMALL, MPI_BYTE, peer[0], tag, MPI_COMM_WORLD, &rq[0]);
        MPI_Irecv(b1, SMALL, MPI_BYTE, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD,
                  &rq[1]);
        {
            int done = 0;

            rc = MPI_SUCCESS;
            t0 = MPI_Wtime();
            while (done < 2 && rc == MPI_SUCCESS && MPI_Wtime() - t0 < BOUND) {
                out = 0;
                rc = MPI_Testsome(2, rq, &out, ind, st);
                for (int j = 0; rc == MPI_SUCCESS && j < out; j++) {
                    if (ind[j] == 0)
                        s0 = chk_small(rc, &st[j], b0, k, peer[0], peer,
                                       "MPI_Testsome [0]");
                    else
                        s1 = chk_small(rc, &st[j], b1, k, peer[1], peer,
                                       "MPI_Testsome [1] (ANY_SOURCE)");
                    done++;
                }
                if (out == MPI_UNDEFINED)
                    break;
            }
            chk(rc == MPI_SUCCESS && done == 2, "round %d, MPI_Testsome: %s, "
                "%d of 2 completed", k, CLS(rc), done);
        }
        break;
    case R_IMPROBE:
        step = "MPI_Improbe/MPI_Mrecv after the drain";
        for (int i = 0; i < 2; i++) {
            unsigned char *b = i ? b1 : b0;
            MPI_Message msg = MPI_MESSAGE_NULL;
            int src;

            flag = 0;
            rc = MPI_SUCCESS;
            t0 = MPI_Wtime();
            while (!flag && rc == MPI_SUCCESS && MPI_Wtime() - t0 < BOUND)
                rc = MPI_Improbe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &flag,
                                 &msg, &st[0]);
            src = rc == MPI_SUCCESS && flag ? st[0].MPI_SOURCE : -99;
            chk(rc == MPI_SUCCESS && flag && (src == peer[0] ||
                src == peer[1]), "round %d, MPI_Improbe(ANY_SOURCE): %s, "
                "flag %d, MPI_SOURCE %d (want %d or %d)", k, CLS(rc), flag,
                src, peer[0], peer[1]);
            if (!flag)
                break;
            rc = MPI_Mrecv(b, SMALL, MPI_BYTE, &msg, &st[1]);
            *(i ? &s1 : &s0) = chk_small(rc, &st[1], b, k, src, peer,
                                         "MPI_Mrecv");
        }
        chk_both(s0, s1, peer, k, "MPI_Improbe(ANY_SOURCE)");
        break;
    case R_TEST:
        step = "MPI_Test after the drain";
        MPI_Irecv(b0, SMALL, MPI_BYTE, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD,
                  &rq[0]);
        MPI_Irecv(b1, SMALL, MPI_BYTE, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD,
                  &rq[1]);
        for (int i = 0; i < 2; i++) {
            flag = 0;
            rc = MPI_SUCCESS;
            t0 = MPI_Wtime();
            while (!flag && rc == MPI_SUCCESS && MPI_Wtime() - t0 < BOUND)
                rc = MPI_Test(&rq[i], &flag, &st[i]);
            if (!flag) {
                chk(0, "round %d, MPI_Test: %s, never completed", k, CLS(rc));
                break;
            }
            *(i ? &s1 : &s0) = chk_small(rc, &st[i], i ? b1 : b0, k, -1,
                                         peer, "MPI_Test(ANY_SOURCE)");
        }
        chk_both(s0, s1, peer, k, "MPI_Test(ANY_SOURCE)");
        break;
    case R_GET_STATUS:
        step = "MPI_Request_get_status after the drain";
        MPI_Irecv(b0, SMALL, MPI_BYTE, peer[0], tag, MPI_COMM_WORLD, &rq[0]);
        flag = 0;
        rc = MPI_SUCCESS;
        t0 = MPI_Wtime();
        while (!flag && rc == MPI_SUCCESS && MPI_Wtime() - t0 < BOUND)
            rc = MPI_Request_get_status(rq[0], &flag, &st[0]);
        if (flag)
            chk_small(rc, &st[0], b0, k, peer[0], peer,
                      "MPI_Request_get_status");
        else
            chk(0, "round %d, MPI_Request_get_status: %s, never complete",
                k, CLS(rc));
        rc = MPI_Wait(&rq[0], &st[0]);
        chk_small(rc, &st[0], b0, k, peer[0], peer, "MPI_Wait after "
                  "MPI_Request_get_status");
        rc = MPI_Recv(b1, SMALL, MPI_BYTE, peer[1], tag, MPI_COMM_WORLD,
                      &st[1]);
        chk_small(rc, &st[1], b1, k, peer[1], peer, "MPI_Recv(peer)");
        break;
    }
}

/* ---- requests outstanding at a drain -------------------------------------
 * Posted on MPI_COMM_WORLD by every survivor before the failure (right and
 * left: the next and the previous survivor in surv[]):
 *   a  MPI_Irecv from right, a tag nobody sends;
 *   b  MPI_Irecv from left, whose checksummed message left sends before
 *      the drain (outstanding_arrived polls MPI_Request_get_status until
 *      it is in);
 *   c  MPI_Irecv(MPI_ANY_SOURCE), a tag nobody sends;
 *   d  a persistent receive (MPI_Recv_init from right, MPI_Start) nobody
 *      matches.
 * After the drain (outstanding_after): MPI_Wait on a, c, d gives
 * FTW_ERR_DRAINED at once, on b MPI_SUCCESS with the data and MPI_SOURCE
 * left (the user's rank); MPI_Start on d gives FTW_ERR_DRAINED. */

#define TAG_A 11
#define TAG_B 12
#define TAG_C 13
#define TAG_D 14
#define MARK_B 5

typedef struct {
    int right, left;
    int a_buf, c_buf, d_buf;
    unsigned char b_buf[SMALL], b_out[SMALL];
    MPI_Request a, b, c, d;
} outstanding_t;

static inline void outstanding_post(outstanding_t *o, const int *surv, int nsurv)
{
    int me = idx_of(surv, nsurv, rank), rc;

    step = "posting the requests";
    o->right = surv[(me + 1) % nsurv];
    o->left = surv[(me + nsurv - 1) % nsurv];
    o->a_buf = o->c_buf = o->d_buf = -1;
    rc = MPI_Irecv(&o->a_buf, 1, MPI_INT, o->right, TAG_A, MPI_COMM_WORLD,
                   &o->a);
    chk_class(rc, MPI_SUCCESS, "a: MPI_Irecv from right (never sent)");
    memset(o->b_buf, 0, sizeof o->b_buf);
    rc = MPI_Irecv(o->b_buf, SMALL, MPI_BYTE, o->left, TAG_B,
                   MPI_COMM_WORLD, &o->b);
    chk_class(rc, MPI_SUCCESS, "b: MPI_Irecv from left (sent)");
    rc = MPI_Irecv(&o->c_buf, 1, MPI_INT, MPI_ANY_SOURCE, TAG_C,
                   MPI_COMM_WORLD, &o->c);
    chk_class(rc, MPI_SUCCESS, "c: MPI_Irecv(MPI_ANY_SOURCE)");
    rc = MPI_Recv_init(&o->d_buf, 1, MPI_INT, o->right, TAG_D,
                       MPI_COMM_WORLD, &o->d);
    chk_class(rc, MPI_SUCCESS, "d: MPI_Recv_init from right");
    rc = MPI_Start(&o->d);
    chk_class(rc, MPI_SUCCESS, "d: MPI_Start before the drain");

    tap_fill(o->b_out, SMALL, seed_of(rank, o->right, MARK_B, SMALL));
    rc = MPI_Send(o->b_out, SMALL, MPI_BYTE, o->right, TAG_B,
                  MPI_COMM_WORLD);
    chk_class(rc, MPI_SUCCESS, "MPI_Send of b's message to right");
}

static inline void outstanding_arrived(outstanding_t *o)
{
    int flag = 0, rc = MPI_SUCCESS;
    double t0 = MPI_Wtime();

    step = "MPI_Request_get_status on b until its message is in";
    while (!flag && rc == MPI_SUCCESS && MPI_Wtime() - t0 < BOUND) {
        rc = MPI_Request_get_status(o->b, &flag, MPI_STATUS_IGNORE);
        if (!flag)
            usleep(1000);
    }
    chk(rc == MPI_SUCCESS && flag, "b's message arrived before the drain "
        "(MPI_Request_get_status: %s, flag %d)", CLS(rc), flag);
}

static inline void outstanding_after(outstanding_t *o)
{
    MPI_Status st;
    double t0;
    int rc;

    step = "MPI_Wait on a";
    t0 = MPI_Wtime();
    rc = MPI_Wait(&o->a, &st);
    chk_class(rc, FTW_ERR_DRAINED, "a: MPI_Wait on MPI_Irecv from right "
              "(never sent) after the drain");
    chk_time(MPI_Wtime() - t0, AT_ONCE, "a: MPI_Wait");
    chk(o->a == MPI_REQUEST_NULL && o->a_buf == -1, "a: request freed (%d), "
        "buffer untouched (%d)", o->a == MPI_REQUEST_NULL, o->a_buf);

    step = "MPI_Wait on b";
    t0 = MPI_Wtime();
    rc = MPI_Wait(&o->b, &st);
    chk_data(rc, &st, o->b_buf, SMALL,
             seed_of(o->left, rank, MARK_B, SMALL), "b: MPI_Wait on "
             "MPI_Irecv whose message arrived before the drain");
    chk(rc == MPI_SUCCESS && st.MPI_SOURCE == o->left && st.MPI_TAG == TAG_B,
        "b: MPI_SOURCE %d (want %d), tag %d", rc == MPI_SUCCESS ?
        st.MPI_SOURCE : -1, o->left, rc == MPI_SUCCESS ? st.MPI_TAG : -1);
    chk_time(MPI_Wtime() - t0, AT_ONCE, "b: MPI_Wait");

    step = "MPI_Wait on c";
    t0 = MPI_Wtime();
    rc = MPI_Wait(&o->c, &st);
    chk_class(rc, FTW_ERR_DRAINED, "c: MPI_Wait on MPI_Irecv(MPI_ANY_SOURCE) "
              "after the drain");
    chk_time(MPI_Wtime() - t0, AT_ONCE, "c: MPI_Wait");
    chk(o->c_buf == -1, "c: buffer untouched (%d)", o->c_buf);

    step = "MPI_Wait on d";
    t0 = MPI_Wtime();
    rc = MPI_Wait(&o->d, &st);
    chk_class(rc, FTW_ERR_DRAINED, "d: MPI_Wait on the started persistent "
              "receive after the drain");
    chk_time(MPI_Wtime() - t0, AT_ONCE, "d: MPI_Wait");
    chk(o->d != MPI_REQUEST_NULL, "d: the persistent request stays "
        "allocated");
    step = "MPI_Start on d";
    if (o->d != MPI_REQUEST_NULL) {
        t0 = MPI_Wtime();
        rc = MPI_Start(&o->d);
        chk_class(rc, FTW_ERR_DRAINED, "d: MPI_Start on the persistent "
                  "receive after the drain");
        chk_time(MPI_Wtime() - t0, AT_ONCE, "d: MPI_Start");
        if (rc == MPI_SUCCESS) {
            /* Started after all: nobody sends; take it back. */
            MPI_Cancel(&o->d);
            MPI_Wait(&o->d, MPI_STATUS_IGNORE);
        }
        rc = MPI_Request_free(&o->d);
        chk_class(rc, MPI_SUCCESS, "d: MPI_Request_free");
    }
    chk(o->d_buf == -1, "d: buffer untouched (%d)", o->d_buf);
}

/* The ring surv[i] -> surv[i+1], one message of len bytes each. */
static inline void ring(const int *surv, int nsurv, size_t len, int what)
{
    int me = idx_of(surv, nsurv, rank);
    int right = surv[(me + 1) % nsurv], left = surv[(me + nsurv - 1) % nsurv];
    unsigned char *sb = xmalloc(len), *rb = xmalloc(len);
    MPI_Request rq[2];
    MPI_Status st[2];
    char desc[96];
    int rc;
    double t0 = MPI_Wtime();

    step = "ring after the drain";
    tap_fill(sb, len, seed_of(rank, right, what, len));
    memset(rb, 0, len);
    MPI_Irecv(rb, (int)len, MPI_BYTE, left, TAG_RING + what, MPI_COMM_WORLD,
              &rq[0]);
    MPI_Isend(sb, (int)len, MPI_BYTE, right, TAG_RING + what,
              MPI_COMM_WORLD, &rq[1]);
    rc = MPI_Waitall(2, rq, st);
    snprintf(desc, sizeof desc, "ring %d -> %d -> %d, %zu bytes", left, rank,
             right, len);
    chk_data(rc, &st[0], rb, len, seed_of(left, rank, what, len), desc);
    chk(rc == MPI_SUCCESS && st[0].MPI_SOURCE == left &&
        st[0].MPI_TAG == TAG_RING + what, "%s: MPI_SOURCE %d (want %d), "
        "tag %d", desc, rc == MPI_SUCCESS ? st[0].MPI_SOURCE : -1, left,
        rc == MPI_SUCCESS ? st[0].MPI_TAG : -1);
    chk_time(MPI_Wtime() - t0, BOUND, desc);
    free(sb);
    free(rb);
}

/* The dead rank d: a send and a receive fail at once. */
static inline void refused(int d)
{
    int v = 1, rc;
    double t0;
    char what[80];

    step = "send to the dead rank after the drain";
    t0 = MPI_Wtime();
    rc = MPI_Send(&v, 1, MPI_INT, d, TAG_RING, MPI_COMM_WORLD);
    snprintf(what, sizeof what, "MPI_Send to dead rank %d after the drain",
             d);
    chk_class(rc, FTW_ERR_PROC_FAIL_STOP, what);
    chk_time(MPI_Wtime() - t0, AT_ONCE, what);
    step = "receive from the dead rank after the drain";
    t0 = MPI_Wtime();
    rc = MPI_Recv(&v, 1, MPI_INT, d, TAG_RING, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE);
    snprintf(what, sizeof what, "MPI_Recv from dead rank %d after the drain",
             d);
    chk_class(rc, FTW_ERR_PROC_FAIL_STOP, what);
    chk_time(MPI_Wtime() - t0, AT_ONCE, what);
}

/* Everything above, for survivors surv[0..3) with the ranks in dead_mask
 * failed: wildcards re-enabled first. */
static inline void traffic_after_drain(const int *surv, int dead_mask)
{
    int me = idx_of(surv, 3, rank), peer[2], rc, n = 0, mask;
    MPI_Group g = MPI_GROUP_NULL;

    peer[0] = surv[(me + 1) % 3];
    peer[1] = surv[(me + 2) % 3];

    step = "FTW_Comm_reenable_any_source after the drain";
    rc = FTW_Comm_reenable_any_source(MPI_COMM_WORLD, &g);
    mask = rc == MPI_SUCCESS ? world_mask_of(g, &n) : -1;
    chk(rc == MPI_SUCCESS && mask == dead_mask,
        "FTW_Comm_reenable_any_source: %s, group %s (want %s)", CLS(rc),
        mask_str(mask), mask_str(dead_mask));
    if (rc == MPI_SUCCESS && g != MPI_GROUP_EMPTY && g != MPI_GROUP_NULL)
        MPI_Group_free(&g);

    ring(surv, 3, 8, 1);
    ring(surv, 3, BIG, 2);
    for (int k = 0; k < NROUNDS; k++) {
        round_send(peer, k);
        round_recv(peer, k);
    }
    for (int r = 0; r < NP; r++)
        if (dead_mask & (1 << r))
            refused(r);
}

#endif /* FTW_FTCHECK_H */
