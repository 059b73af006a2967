/* ftw-test: np=4 mode=ftwrap timeout=40 link=ftwrap expect-failed=3 fate=3:signal:KILL */
/*
 * ivalidate - FTW_Icomm_validate and FTW_Comm_validate_multiple.
 *
 * Before the failure every rank makes two duplicates of MPI_COMM_WORLD,
 * d1 and d2.  Rank 3 leaves a barrier, sleeps 200 ms and SIGKILLs itself.
 * Once each survivor knows of the failure:
 *   - FTW_Icomm_validate on MPI_COMM_WORLD + MPI_Wait: MPI_SUCCESS within
 *     5 s, the request freed, the group {3};
 *   - FTW_Icomm_validate on d2 completed by polling MPI_Test: {3};
 *   - FTW_Comm_validate_multiple over {MPI_COMM_WORLD, d1}: one process,
 *     world rank 3 (through MPI_Group_translate_ranks);
 *   - MPI_Allreduce works afterwards on MPI_COMM_WORLD, d1 and d2 (0+1+2).
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
#include "tap.h"

#define NP 4
#define VICTIM 3
#define NSURV 3
#define BOUND 5.0            /* seconds a call may take after the kill */
#define AT_ONCE 1.0          /* seconds for a call that must fail at once */
#define KILL_DELAY_US 200000 /* victim: from the barrier to its death */
#define SENT (-7777)

/* ---- checks, reported to the lowest survivor ----------------------------- */

#define MAXCHK 64
#define TAG_RESULT 90

typedef struct {
    int ok;
    char what[124];
} chk_t;

static chk_t chks[MAXCHK];
static int nchk, nchk_failed;
static int rank;

static int chk(int cond, const char *fmt, ...)
{
    va_list ap;

    if (!cond)
        nchk_failed++;
    if (nchk == MAXCHK)
        return !!cond;
    chks[nchk].ok = !!cond;
    va_start(ap, fmt);
    vsnprintf(chks[nchk].what, sizeof chks[nchk].what, fmt, ap);
    va_end(ap);
    if (!cond)
        tap_diag("FAILED: %s", chks[nchk].what);
    nchk++;
    return !!cond;
}

static int class_of(int code)
{
    int cls = -1;

    if (code == MPI_SUCCESS)
        return MPI_SUCCESS;
    if (MPI_Error_class(code, &cls) != MPI_SUCCESS)
        return -1;
    return cls;
}

static const char *class_name(int cls)
{
    static char buf[4][32];
    static int next;
    char *b;

    switch (cls) {
    case MPI_SUCCESS: return "MPI_SUCCESS";
    case MPI_ERR_OTHER: return "MPI_ERR_OTHER";
    case MPI_ERR_ARG: return "MPI_ERR_ARG";
    case MPI_ERR_COMM: return "MPI_ERR_COMM";
    case MPI_ERR_PENDING: return "MPI_ERR_PENDING";
    case FTW_ERR_PROC_FAIL_STOP: return "FTW_ERR_PROC_FAIL_STOP";
    case FTW_ERR_ANY_SOURCE_DISABLED: return "FTW_ERR_ANY_SOURCE_DISABLED";
    case FTW_ERR_DRAINED: return "FTW_ERR_DRAINED";
    case FTW_ERR_BUFFER_UNUSABLE: return "FTW_ERR_BUFFER_UNUSABLE";
    case FTW_ERR_INTERRUPTED: return "FTW_ERR_INTERRUPTED";
    }
    b = buf[next++ % 4];
    snprintf(b, sizeof buf[0], "class %d", cls);
    return b;
}

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

/* MPI_Init and the size check; returns 0 if the test is to be skipped. */
static int setup(int *argc, char ***argv)
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

/* Allreduce(SUM of ranks) on comm must give want. */
static inline void chk_allreduce(MPI_Comm comm, int want, const char *what)
{
    int sum = -1, rc;

    step = what;
    rc = MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, comm);
    chk(rc == MPI_SUCCESS && sum == want,
        "%s: MPI_Allreduce(SUM of world ranks): %s, %d (want %d)", what,
        class_name(class_of(rc)), sum, want);
}

/* Validate-family result: rc MPI_SUCCESS and group g exactly {VICTIM}. */
static inline void chk_group3(int rc, MPI_Group *g, const char *what)
{
    int n = -1, mask = rc == MPI_SUCCESS ? world_mask_of(*g, &n) : -1;

    chk(rc == MPI_SUCCESS && n == 1 && mask == 1 << VICTIM,
        "%s: %s, group %s of size %d (want {%d})", what,
        class_name(class_of(rc)), mask_str(mask), n, VICTIM);
    if (rc == MPI_SUCCESS && *g != MPI_GROUP_EMPTY && *g != MPI_GROUP_NULL)
        MPI_Group_free(g);
}

int main(int argc, char **argv)
{
    static const int surv[NSURV] = {0, 1, 2};
    MPI_Comm d1, d2;
    MPI_Request req;
    MPI_Group g;
    int rc, flag;
    double t0;

    if (!setup(&argc, &argv))
        return 0;
    MPI_Comm_dup(MPI_COMM_WORLD, &d1);
    MPI_Comm_dup(MPI_COMM_WORLD, &d2);
    MPI_Comm_set_errhandler(d1, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(d2, MPI_ERRORS_RETURN);

    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS)
        tap_diag("barrier before the kill failed");
    if (rank == VICTIM)
        victim();
    watchdog_start(15.0);

    step = "waiting to know of the failure";
    wait_known(1 << VICTIM, BOUND);

    step = "FTW_Icomm_validate + MPI_Wait on WORLD";
    t0 = MPI_Wtime();
    g = MPI_GROUP_NULL;
    req = MPI_REQUEST_NULL;
    rc = FTW_Icomm_validate(MPI_COMM_WORLD, &g, &req);
    chk_class(rc, MPI_SUCCESS, "FTW_Icomm_validate on WORLD posted");
    if (rc == MPI_SUCCESS) {
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        chk_time(MPI_Wtime() - t0, BOUND, "FTW_Icomm_validate + MPI_Wait");
        chk(req == MPI_REQUEST_NULL, "MPI_Wait freed the validate request");
        chk_group3(rc, &g, "FTW_Icomm_validate(WORLD) + MPI_Wait");
    }

    step = "FTW_Icomm_validate + MPI_Test on d2";
    t0 = MPI_Wtime();
    g = MPI_GROUP_NULL;
    req = MPI_REQUEST_NULL;
    rc = FTW_Icomm_validate(d2, &g, &req);
    chk_class(rc, MPI_SUCCESS, "FTW_Icomm_validate on d2 posted");
    if (rc == MPI_SUCCESS) {
        flag = 0;
        while (rc == MPI_SUCCESS && !flag && MPI_Wtime() - t0 < BOUND)
            rc = MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        chk(flag, "FTW_Icomm_validate(d2): MPI_Test completed it within "
            "%.0f s (after %.3f s)", BOUND, MPI_Wtime() - t0);
        if (!flag && rc == MPI_SUCCESS) {
            /* Not completed by MPI_Test: finish it with MPI_Wait so the
             * rest of the test runs on its own. */
            step = "MPI_Wait on the d2 validate MPI_Test did not complete";
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
            tap_diag("d2 validate: MPI_Wait after MPI_Test gave %s",
                     class_name(class_of(rc)));
        }
        chk_group3(rc, &g, "FTW_Icomm_validate(d2) + MPI_Test");
    }

    step = "FTW_Comm_validate_multiple {WORLD, d1}";
    {
        MPI_Comm comms[2] = {MPI_COMM_WORLD, d1};

        t0 = MPI_Wtime();
        g = MPI_GROUP_NULL;
        rc = FTW_Comm_validate_multiple(2, comms, &g);
        chk_time(MPI_Wtime() - t0, BOUND, "FTW_Comm_validate_multiple");
        chk_group3(rc, &g, "FTW_Comm_validate_multiple({WORLD, d1})");
    }

    chk_allreduce(MPI_COMM_WORLD, 3, "WORLD after validate");
    chk_allreduce(d1, 3, "d1 after validate_multiple");
    chk_allreduce(d2, 3, "d2 after Icomm_validate");

    return finish(surv, NSURV);
}
