/* ftw-test: np=4 mode=ftwrap timeout=40 link=ftwrap expect-failed=1 fate=1:signal:KILL */
/*
 * validate_during - a process dies during FTW_Comm_validate.
 *
 * After a barrier the survivors enter FTW_Comm_validate on MPI_COMM_WORLD
 * at once; rank 1 follows 50 ms later, so the others are
 * inside the agreement waiting for it, after starting a thread that
 * SIGKILLs it 20 us later: it dies inside its validate (or, if the
 * agreement beat the timer, right after it).  The survivors' validate
 * must return within 5 s with the same group everywhere, {} or {1}
 * (compared on the lowest survivor).  Once each survivor knows of the
 * failure, a second FTW_Comm_validate returns {1} everywhere, and
 * MPI_Allreduce, MPI_Bcast (checksummed), MPI_Allgather (rank 1's slot
 * untouched) and MPI_Barrier work over the survivors.  The survivors send
 * their verdicts to the lowest survivor, which prints TAP (plan at the
 * end); they end with MPI_Finalize.
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
#ifndef VICTIM              /* validate_during0.c sets it to 0 */
#define VICTIM 1
#define VICTIM_S "1"
#endif
#define NSURV 3
#define BOUND 5.0              /* seconds a call may take after the kill */
#define ENTER_DELAY_US 50000   /* victim: barrier to entering validate */
#define KILL_DELAY_US 20      /* victim: entering validate to its death */
#define SENT (-7777)
#define TAG_MASK 20

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

static void *killer(void *arg)
{
    (void)arg;
    usleep(KILL_DELAY_US);
    raise(SIGKILL);
    return NULL;
}

/* The victim lets the others wait inside FTW_Comm_validate, then enters
 * it too and dies in it (or, if the agreement beat the timer, just after
 * it: the others may then have returned already). */
static void victim(void)
{
    pthread_t t;
    MPI_Group g;

    fflush(stdout);
    fflush(stderr);
    usleep(ENTER_DELAY_US);
    if (pthread_create(&t, NULL, killer, NULL) != 0)
        raise(SIGKILL);
    FTW_Comm_validate(MPI_COMM_WORLD, &g);
    for (;;)
        pause();
}

int main(int argc, char **argv)
{
    int surv[NSURV], size, rc, v, mask, n, sum, want_sum = 0, root;
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
    for (int r = 0, k = 0; r < NP; r++)
        if (r != VICTIM) {
            surv[k++] = r;
            want_sum += r;
        }
    root = surv[0];

    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS)
        tap_diag("barrier before validate failed");
    if (rank == VICTIM)
        victim();
    watchdog_start(15.0);

    /* The victim dies while this validate runs. */
    step = "FTW_Comm_validate while the victim dies";
    t0 = MPI_Wtime();
    g = MPI_GROUP_NULL;
    rc = FTW_Comm_validate(MPI_COMM_WORLD, &g);
    chk_time(MPI_Wtime() - t0, BOUND,
             "FTW_Comm_validate while rank " VICTIM_S " dies");
    n = -1;
    mask = rc == MPI_SUCCESS ? world_mask_of(g, &n) : -1;
    chk(rc == MPI_SUCCESS && mask >= 0 && (mask & ~(1 << VICTIM)) == 0,
        "FTW_Comm_validate while rank %d dies: %s, group %s (want {} or "
        "{%d})", VICTIM, class_name(class_of(rc)), mask_str(mask), VICTIM);
    if (rc == MPI_SUCCESS && g != MPI_GROUP_EMPTY)
        MPI_Group_free(&g);
    {
        /* Whether the death was already known when validate returned. */
        MPI_Group f;
        int fm = -1, fn = 0;

        if (FTW_Comm_group_failed(MPI_COMM_WORLD, &f) == MPI_SUCCESS) {
            fm = world_mask_of(f, &fn);
            MPI_Group_free(&f);
        }
        tap_diag("first validate: %s after %.3f s; failures known then: %s",
                 mask_str(mask), MPI_Wtime() - t0, mask_str(fm));
    }

    /* The same group on every survivor: the others send theirs to root. */
    step = "comparing the first validate's groups";
    if (rank != root) {
        rc = MPI_Send(&mask, 1, MPI_INT, root, TAG_MASK, MPI_COMM_WORLD);
        chk_class(rc, MPI_SUCCESS, "MPI_Send of my group to the lowest "
                  "survivor");
    } else {
        for (int k = 1; k < NSURV; k++) {
            int theirs = -2;

            rc = MPI_Recv(&theirs, 1, MPI_INT, surv[k], TAG_MASK,
                          MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            chk(rc == MPI_SUCCESS && theirs == mask,
                "first validate: rank %d decided %s, rank %d %s (identical)",
                surv[k], mask_str(theirs), rank, mask_str(mask));
        }
    }

    step = "waiting to know of the failure";
    wait_known(1 << VICTIM, BOUND);

    step = "second FTW_Comm_validate";
    t0 = MPI_Wtime();
    g = MPI_GROUP_NULL;
    rc = FTW_Comm_validate(MPI_COMM_WORLD, &g);
    chk_time(MPI_Wtime() - t0, BOUND, "second FTW_Comm_validate");
    n = -1;
    mask = rc == MPI_SUCCESS ? world_mask_of(g, &n) : -1;
    chk(rc == MPI_SUCCESS && n == 1 && mask == 1 << VICTIM,
        "second FTW_Comm_validate: %s, group %s of size %d (want {%d})",
        class_name(class_of(rc)), mask_str(mask), n, VICTIM);
    if (rc == MPI_SUCCESS && g != MPI_GROUP_EMPTY)
        MPI_Group_free(&g);

    /* Collectives over the survivors. */
    step = "MPI_Allreduce after validate";
    sum = -1;
    rc = MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    chk(rc == MPI_SUCCESS && sum == want_sum,
        "MPI_Allreduce(SUM of ranks) after validate: %s, %d (want %d)",
        class_name(class_of(rc)), sum, want_sum);

    step = "MPI_Bcast after validate";
    {
        char b[4096];

        if (rank == root)
            tap_fill(b, sizeof b, 77);
        else
            memset(b, 0, sizeof b);
        rc = MPI_Bcast(b, (int)sizeof b, MPI_BYTE, root, MPI_COMM_WORLD);
        chk(rc == MPI_SUCCESS && tap_check(b, sizeof b, 77),
            "MPI_Bcast of 4 KiB from root %d after validate: %s, data %s",
            root, class_name(class_of(rc)),
            tap_check(b, sizeof b, 77) ? "intact" : "WRONG");
    }

    step = "MPI_Allgather after validate";
    {
        int all[NP], good = 1;

        for (int r = 0; r < NP; r++)
            all[r] = SENT;
        v = 10 * rank + 1;
        rc = MPI_Allgather(&v, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
        for (int r = 0; r < NP; r++)
            good &= all[r] == (r == VICTIM ? SENT : 10 * r + 1);
        chk(rc == MPI_SUCCESS && good,
            "MPI_Allgather after validate: %s, [%d %d %d %d] (rank %d's "
            "slot untouched)", class_name(class_of(rc)), all[0], all[1],
            all[2], all[3], VICTIM);
    }

    step = "MPI_Barrier after validate";
    rc = MPI_Barrier(MPI_COMM_WORLD);
    chk_class(rc, MPI_SUCCESS, "MPI_Barrier after validate");

    return finish(surv, NSURV);
}
