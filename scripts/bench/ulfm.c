/*
 * ulfm - ftwrap's ULFM calls against the MPI's own collective of the same
 * shape, in one job, no failure (scripts/bench/ulfm runs it).
 *
 *   ulfm [--iters N] [--reps R]
 *
 * Pairs, each timed over N repetitions, in R blocks that alternate the
 * two sides (the machine's speed drifts between blocks):
 *
 *   agree    MPIX_Comm_agree(int)          | PMPI_Allreduce(1 int, BAND)
 *   iagree   MPIX_Comm_iagree + MPI_Wait   | PMPI_Iallreduce + PMPI_Wait
 *   shrink   MPIX_Comm_shrink + free       | PMPI_Comm_dup + PMPI_Comm_free
 *   revoke   revoke a duplicate; the others, blocked in MPI_Recv on it,
 *            see MPIX_ERR_REVOKED and answer rank 0 | rank 0 sends one int
 *            to each (PMPI_Send) and each answers (the same notice and
 *            answer through the MPI); revoke's duplicate is made and freed
 *            outside the timing
 *
 * Prints "ulfm <pattern> <ftwrap_us> <native_us> <ratio>" on rank 0:
 * median times per operation and the median of neighbouring blocks'
 * ratios.  Checks every result (agree's AND, the shrunk size, the
 * revocation's class) and aborts on a wrong one.
 */
#define _POSIX_C_SOURCE 200809L
#define BENCH_NAME "ulfm"
#include <mpi.h>
#include <mpi-ext.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum { P_AGREE, P_IAGREE, P_SHRINK, P_REVOKE, NPAT };
static const char *const pat_name[NPAT] = { "agree", "iagree", "shrink",
                                            "revoke" };
static int size;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* One ULFM operation (side 0) or its native counterpart (side 1). */
static void one(int pat, int side, MPI_Comm dup)
{
    MPI_Request req;
    MPI_Comm nc;
    int v = ~(1 << (rank % 30)), n = -1, rc, x = 0;

    switch (pat) {
    case P_AGREE:
        rc = side ? PMPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_BAND,
                                   MPI_COMM_WORLD)
                  : MPIX_Comm_agree(MPI_COMM_WORLD, &v);
        if (rc != MPI_SUCCESS || (size <= 30 && v != ~((1 << size) - 1)))
            die("agree: rc %d, flag 0x%x", rc, v);
        break;
    case P_IAGREE:
        rc = side ? PMPI_Iallreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_BAND,
                                    MPI_COMM_WORLD, &req)
                  : MPIX_Comm_iagree(MPI_COMM_WORLD, &v, &req);
        if (rc == MPI_SUCCESS)
            rc = side ? PMPI_Wait(&req, MPI_STATUS_IGNORE)
                      : MPI_Wait(&req, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || (size <= 30 && v != ~((1 << size) - 1)))
            die("iagree: rc %d, flag 0x%x", rc, v);
        break;
    case P_SHRINK:
        rc = side ? PMPI_Comm_dup(MPI_COMM_WORLD, &nc)
                  : MPIX_Comm_shrink(MPI_COMM_WORLD, &nc);
        if (rc == MPI_SUCCESS)
            PMPI_Comm_size(nc, &n);
        if (rc != MPI_SUCCESS || n != size)
            die("shrink: rc %d, size %d", rc, n);
        if (side)
            PMPI_Comm_free(&nc);
        else
            MPI_Comm_free(&nc);
        break;
    case P_REVOKE:
        if (rank == 0) {
            if (side)
                for (int r = 1; r < size; r++)
                    PMPI_Send(&x, 1, MPI_INT, r, 1, dup);
            else
                MPIX_Comm_revoke(dup);
            for (int r = 1; r < size; r++)
                PMPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 2, MPI_COMM_WORLD,
                          MPI_STATUS_IGNORE);
        } else {
            rc = side ? PMPI_Recv(&x, 1, MPI_INT, 0, 1, dup,
                                  MPI_STATUS_IGNORE)
                      : MPI_Recv(&x, 1, MPI_INT, 0, 1, dup,
                                 MPI_STATUS_IGNORE);
            if (rc != (side ? MPI_SUCCESS : MPIX_ERR_REVOKED))
                die("revoke: the blocked receive gave %d", rc);
            PMPI_Send(&x, 1, MPI_INT, 0, 2, MPI_COMM_WORLD);
        }
        break;
    }
}

/* Seconds per operation of one block of iters. */
static double block(int pat, int side, int iters)
{
    MPI_Comm dup = MPI_COMM_NULL;
    double t = 0, t0;

    for (int i = 0; i < iters; i++) {
        if (pat == P_REVOKE) {
            MPI_Comm_dup(MPI_COMM_WORLD, &dup);
            MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
        }
        PMPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        one(pat, side, dup);
        t += MPI_Wtime() - t0;
        if (pat == P_REVOKE)
            MPI_Comm_free(&dup);
    }
    /* Rank 0's view: the slowest rank's time for the block. */
    PMPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return t / iters;
}

int main(int argc, char **argv)
{
    int iters = 200, reps = 21;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--iters"))
            iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
    }
    if (iters < 1 || reps < 2)
        die("bad --iters or --reps");
    for (int pat = 0; pat < NPAT; pat++) {
        double *ft = malloc(sizeof(double) * (size_t)reps);
        double *nat = malloc(sizeof(double) * (size_t)reps);
        double *ratio = malloc(sizeof(double) * (size_t)(2 * reps));
        int nr = 0;
        int it = pat == P_REVOKE || pat == P_SHRINK ? (iters + 3) / 4
                                                    : iters;

        block(pat, 0, it);      /* warm both up */
        block(pat, 1, it);
        for (int r = 0; r < reps; r++) {
            int first = r % 2;

            if (first == 0) {
                ft[r] = block(pat, 0, it);
                nat[r] = block(pat, 1, it);
            } else {
                nat[r] = block(pat, 1, it);
                ft[r] = block(pat, 0, it);
            }
            ratio[nr++] = ft[r] / nat[r];
        }
        if (rank == 0) {
            double mr = median(ratio, nr);

            printf("ulfm %-7s %9.2f %9.2f %6.2f\n", pat_name[pat],
                   median(ft, reps) * 1e6, median(nat, reps) * 1e6, mr);
            fflush(stdout);
        }
        free(ft);
        free(nat);
        free(ratio);
    }
    MPI_Finalize();
    return 0;
}
