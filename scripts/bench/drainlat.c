/*
 * drainlat - how long FTW_Comm_drain_all takes with K messages in flight.
 *
 * Run under ftwrap with 2 ranks.  For each K (0, 100, 10000 unless given
 * on the command line), repeatedly: rank 1 starts K MPI_Isend of 64 B to
 * rank 0, which never receives them, then both ranks time
 * FTW_Comm_drain_all(MPI_COMM_WORLD), which ends those requests and
 * discards the messages; rank 1 then completes its requests.  The time of
 * one drain is the slower rank's; the median and minimum over the
 * repetitions are printed as "drain <K> <median_ms> <min_ms>".
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftwrap.h"

#define MSG 64
#define REPS 11

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* One drain with k messages of rank 1's in flight; seconds (slower rank). */
static double drain_once(int rank, int k, MPI_Request *reqs, char *buf)
{
    double t0, dt, worst;

    if (rank == 1)
        for (int i = 0; i < k; i++)
            MPI_Isend(buf + (size_t)i * MSG, MSG, MPI_BYTE, 0, 7,
                      MPI_COMM_WORLD, &reqs[i]);
    PMPI_Barrier(MPI_COMM_WORLD);
    t0 = PMPI_Wtime();
    if (FTW_Comm_drain_all(MPI_COMM_WORLD) != MPI_SUCCESS) {
        fprintf(stderr, "drainlat: rank %d: the drain failed\n", rank);
        PMPI_Abort(MPI_COMM_WORLD, 1);
    }
    dt = PMPI_Wtime() - t0;
    for (int i = 0; rank == 1 && i < k; i++)
        MPI_Wait(&reqs[i], MPI_STATUS_IGNORE);
    PMPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return worst;
}

int main(int argc, char **argv)
{
    int rank, nprocs, ks[8] = { 0, 100, 10000 }, nk = 3, kmax = 0;
    MPI_Request *reqs;
    char *buf;

    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc > 1)
        for (nk = 0; nk + 1 < argc && nk < 8; nk++)
            ks[nk] = atoi(argv[nk + 1]);
    for (int i = 0; i < nk; i++)
        kmax = ks[i] > kmax ? ks[i] : kmax;
    if (nprocs != 2) {
        if (rank == 0)
            fprintf(stderr, "usage: 2 ranks; drainlat [K...]\n");
        MPI_Finalize();
        return 2;
    }
    reqs = malloc(sizeof(*reqs) * (size_t)(kmax + 1));
    buf = calloc((size_t)kmax + 1, MSG);
    for (int j = 0; j < nk; j++) {
        double t[REPS];

        for (int r = 0; r < REPS; r++)
            t[r] = drain_once(rank, ks[j], reqs, buf);
        qsort(t, REPS, sizeof(t[0]), cmp_double);
        if (rank == 0)
            printf("drain %d %.3f %.3f\n", ks[j], t[REPS / 2] * 1e3,
                   t[0] * 1e3);
    }
    free(reqs);
    free(buf);
    MPI_Finalize();
    return 0;
}
