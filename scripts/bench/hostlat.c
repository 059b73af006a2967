/*
 * hostlat: how long a failure on another host takes to become an error.
 *
 *   hostlat kill|crash [--limit S]
 *
 * Run under ftwrap (scripts/ftwrun) on two hosts: rank 0 is the survivor,
 * the ranks on other hosts than rank 0's are victims, the other ranks of
 * rank 0's host idle until the end.  Times are CLOCK_REALTIME, which every
 * host of scripts/cluster-lab shares (one machine).
 *
 * kill   For each victim v in turn: rank 0 sends v a go; v answers with
 *        t0 = now + 50 ms, sleeps until t0 and SIGKILLs itself; rank 0
 *        enters MPI_Recv from v (never matched) and reads t1 when it
 *        returns, which must be with class FTW_ERR_PROC_FAIL_STOP.  Rank 0
 *        prints "kill V USEC" (t1 - t0), waits 300 ms, goes on.
 * crash  After a barrier rank 0 prints "ready" and enters MPI_Recv from
 *        the first victim; the caller crashes the victims' host and notes
 *        when.  Rank 0 prints "crash V T1" (t1 in µs since the epoch) when
 *        the receive returns, with class FTW_ERR_PROC_FAIL_STOP.
 *
 * Every communicator uses MPI_ERRORS_RETURN.  Anything else (success,
 * another class, no return within --limit seconds, default 30) ends the
 * job with a message and status 2.  Lines other than results start with
 * '#'.
 */
#define _GNU_SOURCE

#include <mpi.h>

#include "ftwrap.h"

#define BENCH_NAME "hostlat"
#include "bench.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TAG_NEVER 1 /* never sent */
#define TAG_GO 2
#define TAG_T0 3
#define TAG_DONE 4
#define KILL_DELAY 0.050
#define GAP 0.300

static double now_real(void)
{
    return bench_now(CLOCK_REALTIME);
}

static void sleep_until(double t)
{
    bench_sleep(t - now_real());
}

/* A receive from v that only v's failure ends: its return time. */
static double recv_failure(int v)
{
    int x, rc, cls = -1;
    double t1;

    rc = MPI_Recv(&x, 1, MPI_INT, v, TAG_NEVER, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE);
    t1 = now_real();
    if (rc == MPI_SUCCESS)
        die("MPI_Recv from failed rank %d succeeded", v);
    MPI_Error_class(rc, &cls);
    if (cls != FTW_ERR_PROC_FAIL_STOP)
        die("MPI_Recv from failed rank %d: class %d, not "
            "FTW_ERR_PROC_FAIL_STOP", v, cls);
    return t1;
}

static void victim(void)
{
    double t0;
    int go;

    if (MPI_Recv(&go, 1, MPI_INT, 0, TAG_GO, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE) != MPI_SUCCESS)
        die("victim's receive of its go failed");
    t0 = now_real() + KILL_DELAY;
    MPI_Send(&t0, 1, MPI_DOUBLE, 0, TAG_T0, MPI_COMM_WORLD);
    sleep_until(t0);
    raise(SIGKILL);
}

static void survivor_kill(int size, const int *away)
{
    for (int v = 0; v < size; v++) {
        double t0, t1;
        int go = 1;

        if (!away[v])
            continue;
        if (MPI_Send(&go, 1, MPI_INT, v, TAG_GO, MPI_COMM_WORLD) !=
                MPI_SUCCESS ||
            MPI_Recv(&t0, 1, MPI_DOUBLE, v, TAG_T0, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE) != MPI_SUCCESS)
            die("go to rank %d failed", v);
        t1 = recv_failure(v);
        printf("kill %d %.0f\n", v, (t1 - t0) * 1e6);
        fflush(stdout);
        sleep_until(now_real() + GAP);
    }
}

static void survivor_crash(int size, const int *away)
{
    int v = 0;

    while (v < size && !away[v])
        v++;
    printf("ready\n");
    fflush(stdout);
    printf("crash %d %.0f\n", v, recv_failure(v) * 1e6);
    fflush(stdout);
}

static void limit_alarm(int sig)
{
    static const char msg[] = "hostlat: no return within the limit\n";

    (void)sig;
    if (write(2, msg, sizeof(msg) - 1) < 0) {
        /* nothing to do */
    }
    _exit(3);
}

int main(int argc, char **argv)
{
    char name[MPI_MAX_PROCESSOR_NAME] = "", *names;
    int size, len, crash, limit = 30, *away, one = 1;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (argc < 2 || (strcmp(argv[1], "kill") && strcmp(argv[1], "crash")))
        die("usage: hostlat kill|crash [--limit S]");
    crash = !strcmp(argv[1], "crash");
    if (argc == 4 && !strcmp(argv[2], "--limit"))
        limit = atoi(argv[3]);
    if (limit < 1)
        die("bad --limit");

    MPI_Get_processor_name(name, &len);
    names = calloc((size_t)size, MPI_MAX_PROCESSOR_NAME);
    away = calloc((size_t)size, sizeof(*away));
    if (!names || !away)
        die("out of memory");
    MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names,
                  MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD);
    for (int r = 0; r < size; r++)
        away[r] = strcmp(names + (size_t)r * MPI_MAX_PROCESSOR_NAME, names);
    MPI_Barrier(MPI_COMM_WORLD);

    if (rank == 0) {
        int nv = 0;

        for (int r = 0; r < size; r++)
            nv += away[r];
        if (nv == 0)
            die("every rank runs on %s: no victim on another host", name);
        signal(SIGALRM, limit_alarm);
        alarm((unsigned)(limit * (crash ? 1 : nv)));
        if (crash)
            survivor_crash(size, away);
        else
            survivor_kill(size, away);
        alarm(0);
        for (int r = 1; r < size; r++)
            if (!away[r])
                MPI_Send(&one, 1, MPI_INT, r, TAG_DONE, MPI_COMM_WORLD);
    } else if (away[rank]) {
        if (crash)
            for (;;)
                pause();    /* until the host goes */
        victim();
    } else {
        MPI_Recv(&one, 1, MPI_INT, 0, TAG_DONE, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    }
    free(names);
    free(away);
    MPI_Finalize();
    return 0;
}
