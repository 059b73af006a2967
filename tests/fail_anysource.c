/* ftw-test: np=4 mode=ftwrap timeout=20 link=ftwrap expect-failed=3 fate=3:signal:KILL */
/*
 * fail_anysource - MPI_ANY_SOURCE receives when a process fails.
 *
 * Before the failure rank 0 posts a nonblocking wildcard receive (reqA,
 * tag A, which nobody sends yet).  It then tells rank 3 to go and blocks
 * in a wildcard MPI_Recv (tag B, never sent); rank 3 sleeps 200 ms and
 * SIGKILLs itself.  Rank 0 asserts:
 *   - the blocked wildcard MPI_Recv completes in error,
 *     FTW_ERR_PROC_FAIL_STOP, within 5 s of the kill;
 *   - MPI_Wait(reqA) returns FTW_ERR_ANY_SOURCE_DISABLED without completing
 *     it (reqA is not MPI_REQUEST_NULL), and so does MPI_Test (flag 0);
 *   - a new wildcard MPI_Irecv is posted, and its MPI_Wait returns
 *     FTW_ERR_ANY_SOURCE_DISABLED at once without completing it; it then
 *     cancels; a new wildcard MPI_Recv and MPI_Iprobe fail at once with
 *     FTW_ERR_PROC_FAIL_STOP (no request to leave pending);
 *   - a directed receive from rank 1 still works meanwhile;
 *   - FTW_Comm_group_failed gives one process, world rank 3, and
 *     FTW_Comm_reenable_any_source returns the same group;
 *   - after the re-enable, reqA completes normally with rank 1's
 *     checksummed message, and new wildcard receives (blocking and
 *     nonblocking) get ranks 1's and 2's checksummed messages.
 * Ranks 0-2 then run a checksummed ring for 0.5 s; ranks 1 and 2 send
 * their verdicts to rank 0, which prints TAP (plan at the end); all end
 * with MPI_Finalize.
 */
#include <mpi.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftwrap.h"
#define MAXCHK 40            /* verdicts kept (tap.h) */
#include "tap.h"

#define NP 4
#define VICTIM 3
#define NSURV 3
#define BOUND 5.0            /* seconds a call may take after the kill */
#define AT_ONCE 1.0          /* seconds a call that fails "at once" may take */
#define KILL_DELAY_US 200000 /* victim: from rank 0's go to its death */
#define RING_SECONDS 0.5

#define TAG_GO 9      /* rank 0 -> 3: die now (in 200 ms) */
#define TAG_A 10      /* rank 1 -> 0, into the pending wildcard reqA */
#define TAG_B 11      /* never sent: the blocked wildcard receive */
#define TAG_C 12      /* never sent: new wildcard receives while disabled */
#define TAG_D 13      /* rank 1 -> 0, directed, while wildcards are disabled */
#define TAG_E 14      /* ranks 1, 2 -> 0, wildcard receives after re-enable */
#define TAG_CTRL 15
#define TAG_RING 16
#define TAG_RESULT 17

#define LEN_A 1000
#define LEN_D 64
#define LEN_E (100 * 1024)
#define NE 2          /* TAG_E messages from each of ranks 1 and 2 */

/* ---- checks, reported to rank 0 ---------------------------------------- */

static int rank;

/* rc must be an error of class want. */
static inline int chk_class(int rc, int want, const char *what)
{
    int cls = rc == MPI_SUCCESS ? MPI_SUCCESS : class_of(rc);

    return chk(rc != MPI_SUCCESS && cls == want, "%s: %s (got %s)", what,
               class_name(want), class_name(cls));
}

static inline int chk_time(double t, const char *what)
{
    return chk(t < BOUND, "%s: returned in %.3f s (bound %.0f s)", what, t,
               BOUND);
}

/* Set when rank 0 prints more TAP lines, and the plan, after report(). */
static int plan_later;

/* Ranks 1..NSURV-1 send their checks to rank 0, which prints them all. */
static void report(void)
{
    if (rank != 0) {
        if (MPI_Send(&nchk, 1, MPI_INT, 0, TAG_RESULT, MPI_COMM_WORLD) ||
            MPI_Send(chks, nchk * (int)sizeof(chk_t), MPI_BYTE, 0, TAG_RESULT,
                     MPI_COMM_WORLD))
            tap_diag("cannot send my verdicts to rank 0");
        return;
    }
    for (int i = 0; i < nchk; i++)
        tap_ok_local(chks[i].ok, "rank 0: %s", chks[i].what);
    for (int r = 1; r < NSURV; r++) {
        chk_t theirs[MAXCHK];
        int n = 0, rc;

        rc = MPI_Recv(&n, 1, MPI_INT, r, TAG_RESULT, MPI_COMM_WORLD,
                      MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS && (n < 0 || n > MAXCHK))
            rc = MPI_ERR_COUNT;
        if (rc == MPI_SUCCESS)
            rc = MPI_Recv(theirs, n * (int)sizeof(chk_t), MPI_BYTE, r,
                          TAG_RESULT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (!tap_ok_local(rc == MPI_SUCCESS && n > 0,
                          "rank %d reported %d verdicts", r, n))
            continue;
        for (int i = 0; i < n; i++) {
            theirs[i].what[sizeof theirs[i].what - 1] = '\0';
            tap_ok_local(theirs[i].ok, "rank %d: %s", r, theirs[i].what);
        }
    }
    if (!plan_later)
        tap_plan(tap_count_);
}

/* ---- the survivors' ring ------------------------------------------------ */

/* Ranks 0..NSURV-1 pass checksummed messages around on comm (tap_ring);
 * records one check. */
static void ring(MPI_Comm comm)
{
    long n = tap_ring(comm, NULL, NSURV, rank, RING_SECONDS, TAG_CTRL,
                      TAG_RING);

    chk(n > 0, "survivors' ring: %ld rounds of 64 B / 1 MiB intact", n);
}
/* ---- the test ------------------------------------------------------------ */

static uint64_t seed_e(int src, int seq)
{
    return 5000 + (uint64_t)src * 10 + (uint64_t)seq;
}

/* Length of the seq-th TAG_E message from src: both sizes from each. */
static int len_e(int src, int seq)
{
    return (src + seq) % 2 ? LEN_E : 100;
}

/* Check one wildcard-received TAG_E message against what its source sent;
 * next[] counts the messages seen per source (MPI keeps per-source
 * order). */
static void check_e(const char *how, const MPI_Status *st, const char *buf,
                    int next[NSURV])
{
    int src = st->MPI_SOURCE, cnt = -1, seq, len;

    MPI_Get_count(st, MPI_BYTE, &cnt);
    if (src < 1 || src >= NSURV) {
        chk(0, "%s after re-enable: source %d is not 1 or 2", how, src);
        return;
    }
    seq = next[src]++;
    len = len_e(src, seq);
    chk(cnt == len && st->MPI_TAG == TAG_E && tap_check(buf, len, seed_e(src, seq)),
        "%s after re-enable: message %d of rank %d intact (%d B, got %d)",
        how, seq, src, len, cnt);
}

static void rank0(void)
{
    MPI_Request reqA = MPI_REQUEST_NULL, req;
    MPI_Status st;
    MPI_Group failed = MPI_GROUP_NULL, acked = MPI_GROUP_NULL, world;
    char bufA[LEN_A], small[16], bufD[LEN_D];
    char *e[2 * NE];
    int rc, flag, go = 1, gsize = -1, w3 = -1, zero = 0, cmp = -1;
    int next[NSURV] = {0, 0, 0};
    double t0, t;

    for (int i = 0; i < 2 * NE; i++)
        e[i] = malloc(LEN_E);

    /* A pending wildcard receive, posted before the failure. */
    memset(bufA, 0, sizeof bufA);
    rc = MPI_Irecv(bufA, LEN_A, MPI_BYTE, MPI_ANY_SOURCE, TAG_A,
                   MPI_COMM_WORLD, &reqA);
    chk(rc == MPI_SUCCESS, "wildcard MPI_Irecv posted before the failure");
    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS)
        tap_diag("barrier failed");

    /* Blocked in a wildcard MPI_Recv while rank 3 dies. */
    MPI_Send(&go, 1, MPI_INT, VICTIM, TAG_GO, MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    rc = MPI_Recv(small, 4, MPI_BYTE, MPI_ANY_SOURCE, TAG_B, MPI_COMM_WORLD,
                  &st);
    t = MPI_Wtime() - t0;
    chk_class(rc, FTW_ERR_PROC_FAIL_STOP,
              "wildcard MPI_Recv blocked as 3 dies");
    chk_time(t, "wildcard MPI_Recv blocked as 3 dies");

    /* The pending wildcard request: disabled, not completed. */
    t0 = MPI_Wtime();
    rc = reqA == MPI_REQUEST_NULL ? MPI_ERR_REQUEST : MPI_Wait(&reqA, &st);
    t = MPI_Wtime() - t0;
    chk_class(rc, FTW_ERR_ANY_SOURCE_DISABLED, "MPI_Wait on pending wildcard");
    chk(t < AT_ONCE, "MPI_Wait on pending wildcard: returned in %.3f s", t);
    chk(reqA != MPI_REQUEST_NULL,
        "MPI_Wait on pending wildcard: request not completed (not "
        "MPI_REQUEST_NULL)");
    flag = -1;
    rc = reqA == MPI_REQUEST_NULL ? MPI_ERR_REQUEST
                                  : MPI_Test(&reqA, &flag, &st);
    chk_class(rc, FTW_ERR_ANY_SOURCE_DISABLED, "MPI_Test on pending wildcard");
    chk(reqA != MPI_REQUEST_NULL && flag == 0,
        "MPI_Test on pending wildcard: not completed (flag %d, request %s)",
        flag, reqA == MPI_REQUEST_NULL ? "MPI_REQUEST_NULL" : "pending");

    /* A new nonblocking wildcard receive is posted; its wait reports the
     * disabled state without completing.  Calls without a request (a
     * blocking receive, a probe) fail as the failure itself. */
    req = MPI_REQUEST_NULL;
    t0 = MPI_Wtime();
    rc = MPI_Irecv(small, 4, MPI_BYTE, MPI_ANY_SOURCE, TAG_C, MPI_COMM_WORLD,
                   &req);
    t = MPI_Wtime() - t0;
    chk(rc == MPI_SUCCESS && req != MPI_REQUEST_NULL,
        "new wildcard MPI_Irecv is posted (got %s, %s request)",
        class_name(class_of(rc)), req == MPI_REQUEST_NULL ? "no" : "a");
    chk(t < AT_ONCE, "new wildcard MPI_Irecv: returned in %.3f s", t);
    t0 = MPI_Wtime();
    rc = req == MPI_REQUEST_NULL ? MPI_ERR_REQUEST : MPI_Wait(&req, &st);
    t = MPI_Wtime() - t0;
    chk_class(rc, FTW_ERR_ANY_SOURCE_DISABLED, "MPI_Wait on the new wildcard");
    chk(t < AT_ONCE && req != MPI_REQUEST_NULL,
        "MPI_Wait on the new wildcard: at once (%.3f s), still pending", t);
    if (req != MPI_REQUEST_NULL) {
        flag = 0;
        MPI_Cancel(&req);
        rc = MPI_Wait(&req, &st);
        MPI_Test_cancelled(&st, &flag);
        chk(rc == MPI_SUCCESS && flag && req == MPI_REQUEST_NULL,
            "the new wildcard request cancels (got %s, cancelled %d)",
            class_name(class_of(rc)), flag);
    }
    t0 = MPI_Wtime();
    rc = MPI_Recv(small, 4, MPI_BYTE, MPI_ANY_SOURCE, TAG_C, MPI_COMM_WORLD,
                  &st);
    t = MPI_Wtime() - t0;
    chk_class(rc, FTW_ERR_PROC_FAIL_STOP, "new wildcard MPI_Recv");
    chk(t < AT_ONCE, "new wildcard MPI_Recv: returned in %.3f s", t);
    flag = -1;
    rc = MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
    chk_class(rc, FTW_ERR_PROC_FAIL_STOP, "new wildcard MPI_Iprobe");

    /* Directed traffic is not affected. */
    memset(bufD, 0, sizeof bufD);
    rc = MPI_Recv(bufD, LEN_D, MPI_BYTE, 1, TAG_D, MPI_COMM_WORLD, &st);
    chk(rc == MPI_SUCCESS && tap_check(bufD, LEN_D, 4001),
        "directed MPI_Recv from 1 while wildcards are disabled: intact "
        "(got %s)", class_name(class_of(rc)));

    /* The failed group, and re-enabling. */
    rc = FTW_Comm_group_failed(MPI_COMM_WORLD, &failed);
    chk(rc == MPI_SUCCESS, "FTW_Comm_group_failed returns MPI_SUCCESS");
    if (rc == MPI_SUCCESS) {
        MPI_Group_size(failed, &gsize);
        MPI_Comm_group(MPI_COMM_WORLD, &world);
        if (gsize == 1)
            MPI_Group_translate_ranks(failed, 1, &zero, world, &w3);
        MPI_Group_free(&world);
    }
    chk(gsize == 1 && w3 == VICTIM,
        "FTW_Comm_group_failed: one process, world rank 3 (size %d, rank %d)",
        gsize, w3);
    rc = FTW_Comm_reenable_any_source(MPI_COMM_WORLD, &acked);
    chk(rc == MPI_SUCCESS, "FTW_Comm_reenable_any_source returns MPI_SUCCESS");
    if (rc == MPI_SUCCESS && failed != MPI_GROUP_NULL)
        MPI_Group_compare(failed, acked, &cmp);
    chk(cmp == MPI_IDENT,
        "FTW_Comm_reenable_any_source: same group as FTW_Comm_group_failed");
    if (failed != MPI_GROUP_NULL)
        MPI_Group_free(&failed);
    if (acked != MPI_GROUP_NULL)
        MPI_Group_free(&acked);

    /* Now ranks 1 and 2 send. */
    for (int r = 1; r < NSURV; r++)
        MPI_Send(&go, 1, MPI_INT, r, TAG_CTRL, MPI_COMM_WORLD);

    /* The pending wildcard request completes with rank 1's message. */
    t0 = MPI_Wtime();
    rc = reqA == MPI_REQUEST_NULL ? MPI_ERR_REQUEST : MPI_Wait(&reqA, &st);
    t = MPI_Wtime() - t0;
    chk(rc == MPI_SUCCESS, "MPI_Wait on the pending wildcard after re-enable "
        "succeeds (got %s)", class_name(class_of(rc)));
    if (rc == MPI_SUCCESS) {
        int cnt = -1;

        MPI_Get_count(&st, MPI_BYTE, &cnt);
        chk(st.MPI_SOURCE == 1 && cnt == LEN_A && tap_check(bufA, LEN_A, 4000),
            "pending wildcard: rank 1's %d B intact (source %d, count %d)",
            LEN_A, st.MPI_SOURCE, cnt);
    }
    chk(t < BOUND, "MPI_Wait on the pending wildcard: %.3f s", t);

    /* New wildcard receives work: NE blocking, NE nonblocking. */
    for (int i = 0; i < NE; i++) {
        memset(e[i], 0, LEN_E);
        rc = MPI_Recv(e[i], LEN_E, MPI_BYTE, MPI_ANY_SOURCE, TAG_E,
                      MPI_COMM_WORLD, &st);
        if (chk(rc == MPI_SUCCESS, "wildcard MPI_Recv %d after re-enable "
                "(got %s)", i, class_name(class_of(rc))))
            check_e("wildcard MPI_Recv", &st, e[i], next);
    }
    {
        MPI_Request reqs[NE];
        MPI_Status sts[NE];

        for (int i = 0; i < NE; i++) {
            memset(e[NE + i], 0, LEN_E);
            rc = MPI_Irecv(e[NE + i], LEN_E, MPI_BYTE, MPI_ANY_SOURCE, TAG_E,
                           MPI_COMM_WORLD, &reqs[i]);
            chk(rc == MPI_SUCCESS, "wildcard MPI_Irecv %d after re-enable "
                "(got %s)", i, class_name(class_of(rc)));
            if (rc != MPI_SUCCESS)
                reqs[i] = MPI_REQUEST_NULL;
        }
        rc = MPI_Waitall(NE, reqs, sts);
        if (chk(rc == MPI_SUCCESS, "MPI_Waitall on wildcard MPI_Irecvs "
                "(got %s)", class_name(class_of(rc))))
            for (int i = 0; i < NE; i++)
                check_e("wildcard MPI_Irecv", &sts[i], e[NE + i], next);
    }
    for (int i = 0; i < 2 * NE; i++)
        free(e[i]);
}

static void others(void)
{
    char bufA[LEN_A], bufD[LEN_D], *e = malloc(LEN_E);
    int go = 0, rc;

    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS)
        tap_diag("barrier failed");
    if (rank == 1) {
        tap_fill(bufD, LEN_D, 4001);
        rc = MPI_Send(bufD, LEN_D, MPI_BYTE, 0, TAG_D, MPI_COMM_WORLD);
        chk(rc == MPI_SUCCESS, "directed MPI_Send to 0 (got %s)",
            class_name(class_of(rc)));
    }
    rc = MPI_Recv(&go, 1, MPI_INT, 0, TAG_CTRL, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE);
    chk(rc == MPI_SUCCESS, "go from rank 0 (got %s)",
        class_name(class_of(rc)));
    if (rank == 1) {
        tap_fill(bufA, LEN_A, 4000);
        rc = MPI_Send(bufA, LEN_A, MPI_BYTE, 0, TAG_A, MPI_COMM_WORLD);
        chk(rc == MPI_SUCCESS, "MPI_Send for rank 0's pending wildcard "
            "(got %s)", class_name(class_of(rc)));
    }
    for (int seq = 0; seq < NE; seq++) {
        int len = len_e(rank, seq);

        tap_fill(e, len, seed_e(rank, seq));
        rc = MPI_Send(e, len, MPI_BYTE, 0, TAG_E, MPI_COMM_WORLD);
        chk(rc == MPI_SUCCESS, "MPI_Send %d of %d B for rank 0's wildcard "
            "receives (got %s)", seq, len, class_name(class_of(rc)));
    }
    free(e);
}

int main(int argc, char **argv)
{
    int size, rc;

    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != NP) {
        if (rank == 0)
            printf("1..0 # SKIP needs %d ranks\n", NP);
        MPI_Finalize();
        return 0;
    }

    if (rank == VICTIM) {
        int go;

        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Recv(&go, 1, MPI_INT, 0, TAG_GO, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        fflush(stdout);
        fflush(stderr);
        usleep(KILL_DELAY_US);
        raise(SIGKILL);
        _exit(99); /* not reached */
    }
    if (rank == 0)
        rank0();
    else
        others();
    ring(MPI_COMM_WORLD);
    report();

    fflush(stdout);
    rc = MPI_Finalize();
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "# [rank %d] MPI_Finalize returned %d\n", rank, rc);
        return 1;
    }
    return tap_status() || nchk_failed;
}
