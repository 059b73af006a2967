/*
 * detect - how a failure notice spreads: one job, one rank killed
 * (scripts/bench/detect runs it for n = 2, 4, ...).
 *
 *   detect [--settle S]   under ftwrun (FTW_DETECT=heartbeat): the row below
 *   detect --init-only    natively: MPI_Init's time only
 *
 * Rank 0 picks a kill time 0.3 s ahead and broadcasts it; rank n/2
 * SIGKILLs itself then.  Every other rank blocks in MPI_Recv from it and
 * notes when the call returns (wall clock: one host).  The survivors wait
 * S seconds (default 1) for notices still in flight, then send their
 * times to rank 0, which prints
 *   "detect n init_us first_ms last_ms"
 * first and last being the earliest and latest survivor to know, from the
 * death.  The notices sent come from FTW_STATS=1 (det_fail_sent, summed by
 * the script over the survivors' lines).  MPI_Init's time is from the
 * earliest rank's entry to the last rank's return.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BENCH_NAME "detect"
#include "bench.h"

#define TAG_DEAD 1
#define TAG_TIME 2

int main(int argc, char **argv)
{
    int size, victim, init_only = 0;
    double settle = 1.0, t_in, t_out, in_min, out_max, t_kill = 0, t = 0;
    char b[4];

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--init-only"))
            init_only = 1;
        else if (!strcmp(argv[i], "--settle") && i + 1 < argc)
            settle = atof(argv[++i]);
    }
    t_in = bench_now(CLOCK_REALTIME);
    MPI_Init(&argc, &argv);
    t_out = bench_now(CLOCK_REALTIME);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Reduce(&t_in, &in_min, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(&t_out, &out_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (init_only || size < 2) {
        if (rank == 0)
            printf("init %d %.0f\n", size, (out_max - in_min) * 1e6);
        MPI_Finalize();
        return 0;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    victim = size / 2;
    if (rank == 0)
        t_kill = bench_now(CLOCK_REALTIME) + 0.3;
    MPI_Bcast(&t_kill, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == victim) {
        bench_sleep(t_kill - bench_now(CLOCK_REALTIME));
        fflush(stdout);
        raise(SIGKILL);
    }
    if (MPI_Recv(b, sizeof b, MPI_BYTE, victim, TAG_DEAD, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE) == MPI_SUCCESS)
        die("MPI_Recv from the killed rank succeeded");
    t = bench_now(CLOCK_REALTIME) - t_kill;
    bench_sleep(settle);
    if (rank != 0) {
        MPI_Send(&t, 1, MPI_DOUBLE, 0, TAG_TIME, MPI_COMM_WORLD);
    } else {
        double first = t, last = t, x;

        for (int r = 1; r < size; r++) {
            if (r == victim)
                continue;
            if (MPI_Recv(&x, 1, MPI_DOUBLE, r, TAG_TIME, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE) != MPI_SUCCESS)
                die("no time from rank %d", r);
            first = x < first ? x : first;
            last = x > last ? x : last;
        }
        printf("detect %d %.0f %.1f %.1f\n", size, (out_max - in_min) * 1e6,
               first * 1e3, last * 1e3);
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
