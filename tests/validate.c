/* ftw-test: np=4 mode=ftwrap timeout=40 link=ftwrap expect-failed=3 fate=3:signal:KILL */
/*
 * validate - FTW_Comm_validate and the collectives after it.
 *
 * Without failures, FTW_Comm_validate on MPI_COMM_WORLD returns an empty
 * group on every rank.  Then rank 3 sleeps 200 ms and SIGKILLs itself
 * while ranks 0-2 are in a 1 MiB MPI_Bcast from rank 0 (which returns,
 * within 5 s, MPI_SUCCESS or FTW_ERR_PROC_FAIL_STOP).  Once each survivor
 * knows of the failure (FTW_Comm_group_failed), MPI_Allreduce and
 * MPI_Barrier fail at once with FTW_ERR_PROC_FAIL_STOP, and
 * FTW_Comm_validate returns the group {3} (as world ranks, through
 * MPI_Group_translate_ranks) on ranks 0-2.  After it, over the survivors
 * with the application's rank numbers and layouts (exact values):
 *   MPI_Allreduce (0+1+2), MPI_Barrier, MPI_Bcast from root 1 (checksummed
 *   64 B and 256 KiB), MPI_Bcast from dead root 3 (FTW_ERR_PROC_FAIL_STOP),
 *   MPI_Gather to root 0 (rank 3's slot keeps its sentinel), MPI_Alltoall
 *   (rank 3's slots untouched), MPI_Allgatherv (rank 3's region untouched),
 *   MPI_Reduce_scatter_block (rank 3's block of the send buffer unused),
 *   MPI_Iallreduce + MPI_Wait, MPI_Scan (inclusive, over 0-2);
 * MPI_Comm_split of MPI_COMM_WORLD gives a communicator of ranks 0-2 (same
 * order) on which MPI_Allreduce works; MPI_Comm_dup of MPI_COMM_WORLD
 * fails with FTW_ERR_PROC_FAIL_STOP (dup keeps rank numbers).
 * Ranks 1 and 2 send their verdicts to rank 0, which prints TAP (plan at
 * the end); the survivors end with MPI_Finalize.
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
#define SENT (-7777)         /* sentinel in receive buffers */
#define BCAST_BIG (1 << 20)

/* ---- checks, reported to the lowest survivor ----------------------------- */

#define TAG_RESULT 90

static int rank;

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

/* A survivor stuck in a call says where and leaves: the job then fails
 * quickly, with the step in the log, instead of timing out. */
static const char *volatile step = "start";
static double watchdog_seconds;

static void *watchdog(void *arg)
{
    (void)arg;
    usleep((useconds_t)(watchdog_seconds * 1e6));
    fprintf(stderr, "# [rank %d] WATCHDOG: still in \"%s\" after %.0f s\n",
            rank, step, watchdog_seconds);
    fflush(stdout);
    fflush(stderr);
    _exit(3);
    return NULL;
}

static void watchdog_start(double seconds)
{
    pthread_t t;

    watchdog_seconds = seconds;
    if (pthread_create(&t, NULL, watchdog, NULL) == 0)
        pthread_detach(t);
}

/* The survivors surv[0..nsurv) send their checks to surv[0], which prints
 * TAP (plan at the end).  Returns 1 if every check held everywhere (on
 * surv[0]) or here (elsewhere). */
static int report(const int *surv, int nsurv)
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
static int finish(const int *surv, int nsurv)
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

/* ---- the test ------------------------------------------------------------ */

static void victim(void)
{
    fflush(stdout);
    fflush(stderr);
    usleep(KILL_DELAY_US);
    raise(SIGKILL);
    _exit(99); /* not reached */
}

/* Collectives over the survivors after validate, checked exactly. */
static void after_validate(void)
{
    int rc, v, buf[NP], sbuf[2 * NP], rbuf[2 * NP];
    char *b = malloc(256 * 1024);
    double t0;
    MPI_Request req;

    step = "MPI_Allreduce after validate";
    v = -1;
    rc = MPI_Allreduce(&rank, &v, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    chk(rc == MPI_SUCCESS && v == 0 + 1 + 2,
        "MPI_Allreduce(SUM of ranks) after validate: %s, %d (want 3)",
        class_name(class_of(rc)), v);

    step = "MPI_Barrier after validate";
    rc = MPI_Barrier(MPI_COMM_WORLD);
    chk_class(rc, MPI_SUCCESS, "MPI_Barrier after validate");

    step = "MPI_Bcast root 1 after validate";
    for (int k = 0; k < 2; k++) {
        int len = k ? 256 * 1024 : 64;

        if (rank == 1)
            tap_fill(b, len, 500 + len);
        else
            memset(b, 0, len);
        rc = MPI_Bcast(b, len, MPI_BYTE, 1, MPI_COMM_WORLD);
        chk(rc == MPI_SUCCESS && tap_check(b, len, 500 + len),
            "MPI_Bcast of %d B from root 1 after validate: %s, data %s", len,
            class_name(class_of(rc)),
            tap_check(b, len, 500 + len) ? "intact" : "WRONG");
    }

    step = "MPI_Bcast root 3 after validate";
    t0 = MPI_Wtime();
    v = 5;
    rc = MPI_Bcast(&v, 1, MPI_INT, VICTIM, MPI_COMM_WORLD);
    chk_class(rc, FTW_ERR_PROC_FAIL_STOP, "MPI_Bcast from dead root 3");
    chk_time(MPI_Wtime() - t0, AT_ONCE, "MPI_Bcast from dead root 3");

    step = "MPI_Gather to root 0 after validate";
    for (int i = 0; i < NP; i++)
        buf[i] = SENT;
    v = 100 + rank;
    rc = MPI_Gather(&v, 1, MPI_INT, buf, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0)
        chk(rc == MPI_SUCCESS && buf[0] == 100 && buf[1] == 101 &&
            buf[2] == 102 && buf[3] == SENT,
            "MPI_Gather to root 0: %s, [%d %d %d %d] (want [100 101 102 "
            "%d])", class_name(class_of(rc)), buf[0], buf[1], buf[2], buf[3],
            SENT);
    else
        chk_class(rc, MPI_SUCCESS, "MPI_Gather to root 0 (non-root)");

    step = "MPI_Alltoall after validate";
    for (int i = 0; i < NP; i++) {
        sbuf[i] = rank * 100 + i;
        rbuf[i] = SENT;
    }
    rc = MPI_Alltoall(sbuf, 1, MPI_INT, rbuf, 1, MPI_INT, MPI_COMM_WORLD);
    chk(rc == MPI_SUCCESS && rbuf[0] == rank && rbuf[1] == 100 + rank &&
        rbuf[2] == 200 + rank && rbuf[3] == SENT,
        "MPI_Alltoall: %s, [%d %d %d %d] (want [%d %d %d %d])",
        class_name(class_of(rc)), rbuf[0], rbuf[1], rbuf[2], rbuf[3], rank,
        100 + rank, 200 + rank, SENT);

    step = "MPI_Allgatherv after validate";
    {
        /* Rank r contributes r+1 ints at displacement 2r: 0 | 1 1 | 2 2 2
         * with gaps; rank 3's 4 ints at 6..9 stay sentinels. */
        int counts[NP] = {1, 2, 3, 4}, displs[NP] = {0, 2, 5, 9};
        int mine[NP], all[13], want[13], good = 1;

        for (int i = 0; i < 13; i++)
            all[i] = want[i] = SENT;
        for (int r = 0; r < NSURV; r++)
            for (int k = 0; k < counts[r]; k++)
                want[displs[r] + k] = 10 * r + k;
        for (int k = 0; k <= rank; k++)
            mine[k] = 10 * rank + k;
        rc = MPI_Allgatherv(mine, rank + 1, MPI_INT, all, counts, displs,
                            MPI_INT, MPI_COMM_WORLD);
        for (int i = 0; i < 13; i++)
            good &= all[i] == want[i];
        chk(rc == MPI_SUCCESS && good,
            "MPI_Allgatherv (counts 1,2,3,[4]): %s, layout %s (rank 3's "
            "region untouched)", class_name(class_of(rc)),
            good ? "exact" : "WRONG");
    }

    step = "MPI_Reduce_scatter_block after validate";
    for (int i = 0; i < 2 * NP; i++)
        sbuf[i] = rank * 1000 + i;
    rbuf[0] = rbuf[1] = SENT;
    rc = MPI_Reduce_scatter_block(sbuf, rbuf, 2, MPI_INT, MPI_SUM,
                                  MPI_COMM_WORLD);
    /* sum over s in {0,1,2} of s*1000 + i = 3000 + 3i, i = 2*rank + k */
    chk(rc == MPI_SUCCESS && rbuf[0] == 3000 + 3 * (2 * rank) &&
        rbuf[1] == 3000 + 3 * (2 * rank + 1),
        "MPI_Reduce_scatter_block: %s, [%d %d] (want [%d %d])",
        class_name(class_of(rc)), rbuf[0], rbuf[1], 3000 + 6 * rank,
        3000 + 6 * rank + 3);

    step = "MPI_Iallreduce + MPI_Wait after validate";
    v = rank + 1;
    buf[0] = SENT;
    rc = MPI_Iallreduce(&v, buf, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
    if (rc == MPI_SUCCESS)
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    chk(rc == MPI_SUCCESS && buf[0] == 1 + 2 + 3,
        "MPI_Iallreduce + MPI_Wait (SUM of rank+1): %s, %d (want 6)",
        class_name(class_of(rc)), buf[0]);

    step = "MPI_Scan after validate";
    v = rank + 1;
    buf[0] = SENT;
    rc = MPI_Scan(&v, buf, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    chk(rc == MPI_SUCCESS && buf[0] == (rank + 1) * (rank + 2) / 2,
        "MPI_Scan (SUM of rank+1): %s, %d (want %d)",
        class_name(class_of(rc)), buf[0], (rank + 1) * (rank + 2) / 2);

    step = "MPI_Comm_split after validate";
    {
        MPI_Comm sub = MPI_COMM_NULL;
        int srank = -1, ssize = -1, sum = -1;

        t0 = MPI_Wtime();
        rc = MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &sub);
        chk_class(rc, MPI_SUCCESS, "MPI_Comm_split of WORLD after validate");
        chk_time(MPI_Wtime() - t0, BOUND, "MPI_Comm_split after validate");
        if (rc == MPI_SUCCESS && sub != MPI_COMM_NULL) {
            MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN);
            MPI_Comm_rank(sub, &srank);
            MPI_Comm_size(sub, &ssize);
            chk(ssize == NSURV && srank == rank,
                "split: size %d, rank %d (want %d, %d)", ssize, srank, NSURV,
                rank);
            step = "MPI_Allreduce on the split communicator";
            rc = MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, sub);
            chk(rc == MPI_SUCCESS && sum == 3,
                "MPI_Allreduce on the split communicator: %s, %d (want 3)",
                class_name(class_of(rc)), sum);
            MPI_Comm_free(&sub);
        }
    }

    step = "MPI_Comm_dup after validate";
    {
        MPI_Comm d = MPI_COMM_NULL;

        t0 = MPI_Wtime();
        rc = MPI_Comm_dup(MPI_COMM_WORLD, &d);
        chk_class(rc, FTW_ERR_PROC_FAIL_STOP,
                  "MPI_Comm_dup of WORLD after validate");
        chk_time(MPI_Wtime() - t0, BOUND, "MPI_Comm_dup after validate");
        if (rc == MPI_SUCCESS && d != MPI_COMM_NULL)
            MPI_Comm_free(&d);
    }
    free(b);
}

int main(int argc, char **argv)
{
    static const int surv[NSURV] = {0, 1, 2};
    int size, rc, v, mask, n;
    char *big;
    MPI_Group g;
    double t0;

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
    big = malloc(BCAST_BIG);

    /* Without failures: the empty group everywhere. */
    step = "FTW_Comm_validate without failures";
    g = MPI_GROUP_NULL;
    rc = FTW_Comm_validate(MPI_COMM_WORLD, &g);
    n = -1;
    mask = rc == MPI_SUCCESS ? world_mask_of(g, &n) : -1;
    chk(rc == MPI_SUCCESS && n == 0,
        "FTW_Comm_validate without failures: %s, group %s of size %d "
        "(want {})", class_name(class_of(rc)), mask_str(mask), n);
    if (rc == MPI_SUCCESS && g != MPI_GROUP_EMPTY)
        MPI_Group_free(&g);
    v = -1;
    rc = MPI_Allreduce(&rank, &v, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    chk(rc == MPI_SUCCESS && v == 6, "MPI_Allreduce after the empty "
        "validate: %s, %d (want 6)", class_name(class_of(rc)), v);

    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS)
        tap_diag("barrier before the kill failed");
    if (rank == VICTIM)
        victim();
    watchdog_start(15.0);

    /* A collective in progress as rank 3 dies. */
    step = "MPI_Bcast in progress during the death";
    if (rank == 0)
        tap_fill(big, BCAST_BIG, 42);
    t0 = MPI_Wtime();
    rc = MPI_Bcast(big, BCAST_BIG, MPI_BYTE, 0, MPI_COMM_WORLD);
    chk(rc == MPI_SUCCESS || class_of(rc) == FTW_ERR_PROC_FAIL_STOP,
        "1 MiB MPI_Bcast in progress as 3 dies: MPI_SUCCESS or "
        "FTW_ERR_PROC_FAIL_STOP (got %s)", class_name(class_of(rc)));
    chk_time(MPI_Wtime() - t0, BOUND + KILL_DELAY_US * 1e-6,
             "MPI_Bcast in progress as 3 dies");
    if (rc == MPI_SUCCESS)
        chk(tap_check(big, BCAST_BIG, 42),
            "MPI_Bcast in progress as 3 dies: successful, data intact");

    step = "waiting to know of the failure";
    wait_known(1 << VICTIM, BOUND);

    /* Known failure, no validate yet: collectives fail at once. */
    step = "MPI_Allreduce before validate";
    t0 = MPI_Wtime();
    rc = MPI_Allreduce(&rank, &v, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    chk_class(rc, FTW_ERR_PROC_FAIL_STOP, "MPI_Allreduce after the failure");
    chk_time(MPI_Wtime() - t0, AT_ONCE, "MPI_Allreduce after the failure");
    step = "MPI_Barrier before validate";
    t0 = MPI_Wtime();
    rc = MPI_Barrier(MPI_COMM_WORLD);
    chk_class(rc, FTW_ERR_PROC_FAIL_STOP, "MPI_Barrier after the failure");
    chk_time(MPI_Wtime() - t0, AT_ONCE, "MPI_Barrier after the failure");

    step = "FTW_Comm_validate after the failure";
    t0 = MPI_Wtime();
    g = MPI_GROUP_NULL;
    rc = FTW_Comm_validate(MPI_COMM_WORLD, &g);
    chk_time(MPI_Wtime() - t0, BOUND, "FTW_Comm_validate after the failure");
    n = -1;
    mask = rc == MPI_SUCCESS ? world_mask_of(g, &n) : -1;
    chk(rc == MPI_SUCCESS && n == 1 && mask == 1 << VICTIM,
        "FTW_Comm_validate: %s, group %s of size %d (want {3})",
        class_name(class_of(rc)), mask_str(mask), n);
    if (rc == MPI_SUCCESS && g != MPI_GROUP_EMPTY)
        MPI_Group_free(&g);

    if (rc == MPI_SUCCESS)
        after_validate();

    free(big);
    return finish(surv, NSURV);
}
