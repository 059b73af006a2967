/*
 * survivors.h - what the validate, failure-handler and communicator
 * creation tests share (comm_create_fail.c, ivalidate.c, failhandler.c,
 * failhandler_subset.c).
 *
 * After a process failure collectives are off, so each survivor keeps its
 * own list of checks and report() sends them point-to-point to the lowest
 * survivor, which prints TAP; a watchdog thread names the step a stuck
 * survivor is in and ends it.  The including test defines NP, VICTIM,
 * NSURV, BOUND, AT_ONCE and KILL_DELAY_US first, and includes <pthread.h>,
 * <signal.h>, <stdarg.h>, <stdio.h>, <stdlib.h>, <string.h>, <unistd.h>,
 * "ftwrap.h" and "tap.h".
 */
#ifndef FTW_SURVIVORS_H
#define FTW_SURVIVORS_H

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

/* A survivor stuck in a call says where (the step, and its threads'
 * stacks) and leaves: the job then fails quickly, with both in the log,
 * instead of timing out. */
static const char *volatile step = "start";
static double watchdog_seconds;

static void *watchdog(void *arg)
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
static void busy_end(void);

static int finish(const int *surv, int nsurv)
{
    int ok, rc;

    busy_end();
    ok = report(surv, nsurv);

    step = "MPI_Finalize";
    fflush(stdout);
    rc = MPI_Finalize();
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "# [rank %d] MPI_Finalize returned %d\n", rank, rc);
        return 1;
    }
    return ok ? 0 : 1;
}

/* ---- a second thread (SURVIVORS_THREADS) -------------------------------- */

/*
 * A test defining SURVIVORS_THREADS runs under MPI_THREAD_MULTIPLE
 * (skipped where the MPI grants less), and on every rank but VICTIM a
 * second thread keeps making duplicates of MPI_COMM_SELF and sending a
 * checksummed message to itself on each, from setup to finish: another
 * thread's creations and traffic while the test's own calls run and its
 * victim dies.  finish() checks that thread's work.
 */
#ifdef SURVIVORS_THREADS
#include <stdatomic.h>

static atomic_int busy_stop;
static pthread_t busy_tid;
static int busy_started, busy_bad;
static long busy_rounds;

static void *busy_main(void *arg)
{
    unsigned char out[256], in[256];

    (void)arg;
    while (!atomic_load(&busy_stop) && !busy_bad) {
        MPI_Comm d;
        MPI_Request r[2];
        MPI_Status st[2];

        if (MPI_Comm_dup(MPI_COMM_SELF, &d) != MPI_SUCCESS) {
            busy_bad = 1;
            break;
        }
        tap_fill(out, sizeof(out), (uint64_t)busy_rounds);
        memset(in, 0, sizeof(in));
        if (MPI_Irecv(in, (int)sizeof(in), MPI_BYTE, 0, 1, d, &r[0]) ||
            MPI_Isend(out, (int)sizeof(out), MPI_BYTE, 0, 1, d, &r[1]) ||
            MPI_Waitall(2, r, st) ||
            !tap_check(in, sizeof(in), (uint64_t)busy_rounds))
            busy_bad = 1;
        MPI_Comm_free(&d);
        busy_rounds++;
    }
    return NULL;
}

static void busy_start(void)
{
    busy_started = rank != VICTIM &&
                   pthread_create(&busy_tid, NULL, busy_main, NULL) == 0;
}

static void busy_end(void)
{
    if (rank == VICTIM)
        return;
    atomic_store(&busy_stop, 1);
    if (busy_started)
        pthread_join(busy_tid, NULL);
    chk(busy_started && !busy_bad && busy_rounds > 0,
        "a second thread's %ld duplicates of MPI_COMM_SELF, each with a "
        "checksummed message to itself: all intact", busy_rounds);
}
#else
static void busy_start(void) {}
static void busy_end(void) {}
#endif

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

#ifdef SURVIVORS_THREADS
    int level = MPI_THREAD_SINGLE;

    MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &level);
#else
    MPI_Init(argc, argv);
#endif
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != NP) {
        if (rank == 0)
            printf("1..0 # SKIP needs %d ranks\n", NP);
        MPI_Finalize();
        return 0;
    }
#ifdef SURVIVORS_THREADS
    if (level < MPI_THREAD_MULTIPLE) {
        if (rank == 0)
            printf("1..0 # SKIP the MPI grants no MPI_THREAD_MULTIPLE\n");
        MPI_Finalize();
        return 0;
    }
#endif
    busy_start();
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

#endif /* FTW_SURVIVORS_H */
