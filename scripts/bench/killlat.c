/*
 * killlat: kill-to-error latency of ftwrap's failure detection.
 *
 *   killlat [--delay MS] [--gap MS] [--limit S]
 *
 * Run under ftwrap (scripts/ftwrun) with N >= 2 ranks.  Rank 0 is the
 * survivor, ranks 1 .. N-1 are victims.  The ranks exchange their pids
 * (MPI_Allgather), then every victim blocks in an MPI_Recv from rank 0
 * that is never matched, until it is killed.  For each victim v in turn:
 *
 *   - rank 0 hands v's pid to a killer thread and enters MPI_Recv from v
 *     (never matched either);
 *   - the killer thread sleeps --delay ms (20), reads t0 from
 *     CLOCK_MONOTONIC and sends SIGKILL to v;
 *   - rank 0 reads t1 when MPI_Recv returns, which must be with an error
 *     of class FTW_ERR_PROC_FAIL_STOP; the latency is t1 - t0;
 *   - rank 0 waits --gap ms (200) before the next victim.
 *
 * The gap lets the job settle after a death: MPICH's hydra signals the
 * survivors (SIGUSR1), which may then query the launcher for the dead
 * processes, and a rank killed while such a query is in flight can make
 * hydra's proxy fail on the closed socket and end the whole job.
 *
 * Every communicator uses MPI_ERRORS_RETURN.  Anything else -- MPI_Recv
 * succeeding, another error class, returning before the kill, not
 * returning within --limit seconds (30) of the kill, a victim's receive
 * returning at all, ftwrap not loaded -- ends the job with a message and
 * a nonzero status.  After the last victim rank 0 prints one line per
 * kill, in µs, and calls MPI_Finalize (which ftwrap lets return although
 * the victims are gone):
 *
 *   kill <victim> <usec>
 *
 * Other lines start with '#'.  The killer thread makes no MPI calls; the
 * process asks for MPI_THREAD_FUNNELED.
 */
#define _GNU_SOURCE

#include <mpi.h>

#include "ftwrap.h"

#define BENCH_NAME "killlat"
#include "bench.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define TAG_NEVER 1 /* never sent: every receive of the benchmark */


static void errstr(int rc, char *buf, size_t len)
{
    char s[MPI_MAX_ERROR_STRING];
    int cls = -1, n = 0;
    MPI_Error_class(rc, &cls);
    if (MPI_Error_string(rc, s, &n) != MPI_SUCCESS)
        snprintf(s, sizeof s, "?");
    snprintf(buf, len, "code %d, class %d: %s", rc, cls, s);
}

/* ---- the killer thread ------------------------------------------------ */

struct killer {
    sem_t go;        /* rank 0 -> killer: kill `pid` after `delay` */
    sem_t killed;    /* killer -> rank 0: t0 and err are set */
    sem_t done;      /* rank 0 -> killer: MPI_Recv returned */
    pid_t pid;       /* 0: leave */
    int victim;
    double delay;    /* seconds */
    double limit;    /* seconds from the kill to MPI_Recv's return */
    double gap;      /* seconds between one return and the next victim */
    double t0;
    int err;         /* errno of kill(), or 0 */
};

static void *killer_main(void *arg)
{
    struct killer *k = arg;

    for (;;) {
        while (sem_wait(&k->go) < 0)
            ;
        if (k->pid == 0)
            return NULL;
        bench_sleep(k->delay);
        k->t0 = bench_now(CLOCK_MONOTONIC);
        k->err = kill(k->pid, SIGKILL) < 0 ? errno : 0;
        sem_post(&k->killed);

        /* Watchdog: MPI_Recv must return within the limit. */
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += (time_t)k->limit;
        int rc;
        while ((rc = sem_timedwait(&k->done, &dl)) < 0 && errno == EINTR)
            ;
        if (rc < 0) {
            fprintf(stderr,
                    "killlat: rank 0: MPI_Recv from rank %d (pid %d) did not "
                    "return within %g s of its SIGKILL\n",
                    k->victim, (int)k->pid, k->limit);
            fflush(stderr);
            _exit(3);
        }
    }
}

/* ---- options ---------------------------------------------------------- */

static int usage(const char *msg)
{
    if (rank == 0) {
        if (msg)
            fprintf(stderr, "killlat: %s\n", msg);
        fprintf(stderr,
                "usage: killlat [--delay MS] [--gap MS] [--limit S]\n");
    }
    return 2;
}

static int parse_opts(int argc, char **argv, double *delay, double *gap,
                      double *limit)
{
    *delay = 0.020;
    *gap = 0.200;
    *limit = 30;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end;
        if (!strcmp(a, "--delay") && v) {
            double ms = strtod(v, &end);
            if (*end || !(ms >= 0) || ms > 10000)
                return usage("bad --delay");
            *delay = ms / 1000;
            i++;
        } else if (!strcmp(a, "--gap") && v) {
            double ms = strtod(v, &end);
            if (*end || !(ms >= 0) || ms > 60000)
                return usage("bad --gap");
            *gap = ms / 1000;
            i++;
        } else if (!strcmp(a, "--limit") && v) {
            *limit = strtod(v, &end);
            if (*end || !(*limit >= 1) || *limit > 3600)
                return usage("bad --limit");
            i++;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            return usage(NULL);
        } else {
            return usage("unknown or incomplete option");
        }
    }
    return 0;
}

/* ---- the benchmark ---------------------------------------------------- */

/* A victim: wait for a message that never comes, until killed. */
static void victim(void)
{
    int x, rc;
    char s[MPI_MAX_ERROR_STRING + 64];

    rc = MPI_Recv(&x, 1, MPI_INT, 0, TAG_NEVER, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE);
    errstr(rc, s, sizeof s);
    die("victim's MPI_Recv from rank 0 returned (%s); it should have "
        "been killed first", s);
}

static void survivor(int nranks, const int *pids, double delay, double gap,
                     double limit)
{
    struct killer k = { .delay = delay, .limit = limit, .gap = gap };
    pthread_t th;
    double *lat = malloc(sizeof *lat * (size_t)nranks);
    char s[MPI_MAX_ERROR_STRING + 64];

    if (!lat)
        die("out of memory");
    if (sem_init(&k.go, 0, 0) || sem_init(&k.killed, 0, 0) ||
        sem_init(&k.done, 0, 0))
        die("sem_init: %s", strerror(errno));
    int e = pthread_create(&th, NULL, killer_main, &k);
    if (e)
        die("pthread_create: %s", strerror(e));

    for (int v = 1; v < nranks; v++) {
        int x, rc, cls = -1;

        k.pid = pids[v];
        k.victim = v;
        sem_post(&k.go);
        rc = MPI_Recv(&x, 1, MPI_INT, v, TAG_NEVER, MPI_COMM_WORLD,
                      MPI_STATUS_IGNORE);
        double t1 = bench_now(CLOCK_MONOTONIC);
        sem_post(&k.done);
        while (sem_wait(&k.killed) < 0)
            ;

        if (k.err)
            die("kill(%d, SIGKILL) of rank %d: %s", (int)k.pid, v,
                strerror(k.err));
        errstr(rc, s, sizeof s);
        if (rc == MPI_SUCCESS)
            die("MPI_Recv from killed rank %d returned MPI_SUCCESS", v);
        MPI_Error_class(rc, &cls);
        if (cls != FTW_ERR_PROC_FAIL_STOP)
            die("MPI_Recv from killed rank %d: expected class "
                "FTW_ERR_PROC_FAIL_STOP (%d), got %s",
                v, FTW_ERR_PROC_FAIL_STOP, s);
        if (t1 < k.t0)
            die("MPI_Recv from rank %d returned (%s) %.0f us before the "
                "kill", v, s, (k.t0 - t1) * 1e6);
        lat[v] = t1 - k.t0;
        if (v + 1 < nranks)
            bench_sleep(k.gap);
    }

    k.pid = 0;
    sem_post(&k.go);
    pthread_join(th, NULL);

    for (int v = 1; v < nranks; v++)
        printf("kill %d %.1f\n", v, lat[v] * 1e6);
    fflush(stdout);
    free(lat);
}

int main(int argc, char **argv)
{
    int nranks, provided;
    double delay, gap, limit;

    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    int rc = parse_opts(argc, argv, &delay, &gap, &limit);
    if (rc) {
        MPI_Finalize();
        return rc;
    }
    if (nranks < 2) {
        if (rank == 0)
            fprintf(stderr, "killlat: needs at least 2 ranks, got %d\n",
                    nranks);
        MPI_Finalize();
        return 2;
    }
    if (provided < MPI_THREAD_FUNNELED)
        die("MPI_Init_thread provides thread level %d, below "
            "MPI_THREAD_FUNNELED", provided);

    /* Without ftwrap the first MPI_Recv would hang: refuse to start. */
    int (*initialized)(int *) = (int (*)(int *))dlsym(RTLD_DEFAULT,
                                                     "FTW_Initialized");
    int on = 0;
    if (!initialized || initialized(&on) != MPI_SUCCESS || !on)
        die("ftwrap is not active in this process; run killlat with "
            "scripts/ftwrun");

    int me = (int)getpid();
    int *pids = malloc(sizeof *pids * (size_t)nranks);
    if (!pids)
        die("out of memory");
    rc = MPI_Allgather(&me, 1, MPI_INT, pids, 1, MPI_INT, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS)
        die("MPI_Allgather of the pids failed");

    if (rank == 0) {
        char ver[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(ver, &len);
        ver[strcspn(ver, "\n\r,")] = 0;
        for (char *c = ver; *c; c++) /* MPICH: "MPICH Version:\t4.0.2" */
            if (*c == '\t')
                *c = ' ';
        printf("# killlat: %s; ranks %d, delay %g ms, gap %g ms, limit %g s\n",
               ver, nranks, delay * 1000, gap * 1000, limit);
        fflush(stdout);
        survivor(nranks, pids, delay, gap, limit);
    } else {
        victim();
    }

    free(pids);
    MPI_Finalize();
    return 0;
}
