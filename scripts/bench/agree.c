/*
 * agree - ftwrap's agreements against MPI_Allreduce of one int, in one
 * job without failures (scripts/bench/agree runs it for n = 2, 4, ...).
 *
 *   agree [--calls N] [--ops MASK]  under ftwrun: the table row below
 *                          (MASK: bit 0 allreduce, 1 validate, 2 agree,
 *                          3 shrink, 4 drain; default all)
 *   agree --init-only      natively: MPI_Init's time only
 *
 * Each of N rounds times, in turn, MPI_Allreduce(1 int, MPI_SUM),
 * FTW_Comm_validate, MPIX_Comm_agree, MPIX_Comm_shrink (+ free of the
 * result) and FTW_Comm_drain_all on MPI_COMM_WORLD, each after a
 * PMPI_Barrier; a call's time is the slowest rank's.  Rank 0 prints
 * "agree n init_us allreduce_us validate_us agree_us shrink_us drain_us"
 * (medians), MPI_Init's time being from the earliest rank's entry to the
 * last rank's return (wall clock).  The ftwrap calls are looked up at run
 * time, so the same binary runs natively for the MPI_Init time alone.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_NAME "agree"
#include "bench.h"

enum { OP_ALLREDUCE, OP_VALIDATE, OP_AGREE, OP_SHRINK, OP_DRAIN, NOP };

static double wall(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int (*validate)(MPI_Comm, MPI_Group *);
    int (*agree)(MPI_Comm, int *);
    int (*shrink)(MPI_Comm, MPI_Comm *);
    int (*drain)(MPI_Comm);
    int rank, size, calls = 30, init_only = 0;
    unsigned ops = (1u << NOP) - 1;
    double t_in, t_out, in_min, out_max, *t;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--calls") && i + 1 < argc)
            calls = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--init-only"))
            init_only = 1;
        else if (!strcmp(argv[i], "--ops") && i + 1 < argc)
            ops = (unsigned)strtoul(argv[++i], NULL, 0);
    }
    t_in = wall();
    MPI_Init(&argc, &argv);
    t_out = wall();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Reduce(&t_in, &in_min, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(&t_out, &out_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (init_only) {
        if (rank == 0)
            printf("init %d %.0f\n", size, (out_max - in_min) * 1e6);
        MPI_Finalize();
        return 0;
    }
    validate = (int (*)(MPI_Comm, MPI_Group *))dlsym(RTLD_DEFAULT,
                                                     "FTW_Comm_validate");
    agree = (int (*)(MPI_Comm, int *))dlsym(RTLD_DEFAULT, "MPIX_Comm_agree");
    shrink = (int (*)(MPI_Comm, MPI_Comm *))dlsym(RTLD_DEFAULT,
                                                  "MPIX_Comm_shrink");
    drain = (int (*)(MPI_Comm))dlsym(RTLD_DEFAULT, "FTW_Comm_drain_all");
    if (!validate || !agree || !shrink || !drain) {
        if (rank == 0)
            fprintf(stderr, "agree: run it under ftwrun\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    t = calloc((size_t)NOP * (size_t)calls, sizeof(*t));
    for (int r = -2; r < calls; r++) {      /* two rounds of warm-up */
        for (int op = 0; op < NOP; op++) {
            double t0;
            int v = 1, sum = 0;
            MPI_Group g;
            MPI_Comm nc;

            if (!(ops & (1u << op)))
                continue;
            PMPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
            switch (op) {
            case OP_ALLREDUCE:
                MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
                if (sum != size)
                    MPI_Abort(MPI_COMM_WORLD, 3);
                break;
            case OP_VALIDATE:
                if (validate(MPI_COMM_WORLD, &g) != MPI_SUCCESS)
                    MPI_Abort(MPI_COMM_WORLD, 3);
                MPI_Group_free(&g);
                break;
            case OP_AGREE:
                v = ~0;
                if (agree(MPI_COMM_WORLD, &v) != MPI_SUCCESS || v != ~0)
                    MPI_Abort(MPI_COMM_WORLD, 3);
                break;
            case OP_SHRINK:
                if (shrink(MPI_COMM_WORLD, &nc) != MPI_SUCCESS)
                    MPI_Abort(MPI_COMM_WORLD, 3);
                MPI_Comm_free(&nc);
                break;
            case OP_DRAIN:
                if (drain(MPI_COMM_WORLD) != MPI_SUCCESS)
                    MPI_Abort(MPI_COMM_WORLD, 3);
                break;
            }
            if (r >= 0)
                t[op * calls + r] = MPI_Wtime() - t0;
        }
    }
    MPI_Allreduce(MPI_IN_PLACE, t, NOP * calls, MPI_DOUBLE, MPI_MAX,
                  MPI_COMM_WORLD);
    if (rank == 0) {
        printf("agree %d %.0f", size, (out_max - in_min) * 1e6);
        for (int op = 0; op < NOP; op++)
            printf(" %.1f", bench_median(t + op * calls, calls) * 1e6);
        printf("\n");
        fflush(stdout);
    }
    free(t);
    /* The others' FTW_STATS lines come after the row, not inside it. */
    PMPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
