/*
 * coll - what ftwrap's blocking collectives cost against the MPI's own, in
 * one job: MPI_Allreduce (MPI_SUM of doubles) and MPI_Bcast from rank 0,
 * from 8 B to 16 MiB, in three ways in alternating blocks: PMPI_ (the
 * MPI's own), MPI_ on a duplicate with MPI_ERRORS_ARE_FATAL (a failure
 * ends the job: no private copy) and MPI_ on a duplicate with
 * MPI_ERRORS_RETURN (the output span goes through a private copy, so a
 * collective a failure cuts never writes the program's buffer later).
 * Prints "coll <op> <bytes> <native_us> <fatal_us> <return_us>
 * <fatal/native> <return/native>", medians; the ratios are medians of
 * each block's ratio to the native block next to it.
 */
#define _POSIX_C_SOURCE 200809L
#define BENCH_NAME "coll"
#include "bench.h"

#include <string.h>

#define MAXB (16 << 20)
#define MAXREPS 100

typedef int (*allreduce_fn)(const void *, void *, int, MPI_Datatype, MPI_Op,
                            MPI_Comm);
typedef int (*bcast_fn)(void *, int, MPI_Datatype, int, MPI_Comm);

/* Microseconds per call of iters calls. */
static double block(int op, int ftw, MPI_Comm comm, double *a, double *b,
                    int bytes, int iters)
{
    allreduce_fn ar = ftw ? MPI_Allreduce : PMPI_Allreduce;
    bcast_fn bc = ftw ? MPI_Bcast : PMPI_Bcast;
    int n = bytes / 8;
    double t0;

    PMPI_Barrier(MPI_COMM_WORLD);
    t0 = PMPI_Wtime();
    for (int i = 0; i < iters; i++) {
        int rc = op == 0 ? ar(a, b, n, MPI_DOUBLE, MPI_SUM, comm)
                         : bc(b, n, MPI_DOUBLE, 0, comm);

        if (rc != MPI_SUCCESS)
            die("collective failed: %d", rc);
    }
    return (PMPI_Wtime() - t0) * 1e6 / iters;
}

int main(int argc, char **argv)
{
    static const char *const names[2] = { "allreduce", "bcast" };
    double *a, *b;
    int reps = 11;
    MPI_Comm fatal, ret;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 1; i + 1 < argc; i += 2)
        if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
    if (reps < 1 || reps > MAXREPS)
        die("--reps must be 1..%d", MAXREPS);
    a = malloc(MAXB);
    b = malloc(MAXB);
    if (a == NULL || b == NULL)
        die("out of memory");
    for (int i = 0; i < MAXB / 8; i++)
        a[i] = b[i] = i;
    MPI_Comm_dup(MPI_COMM_WORLD, &fatal);
    MPI_Comm_dup(MPI_COMM_WORLD, &ret);
    MPI_Comm_set_errhandler(ret, MPI_ERRORS_RETURN);
    for (int op = 0; op < 2; op++)
        for (int bytes = 8; bytes <= MAXB; bytes *= 8) {
            double t[3][MAXREPS], rf[MAXREPS], rr[MAXREPS];
            int iters = bytes <= 4096 ? 2000 : bytes <= (1 << 18) ? 200 : 10;

            block(op, 1, ret, a, b, bytes, iters / 4 + 1);   /* warm up */
            for (int r = 0; r < reps; r++) {
                t[0][r] = block(op, 0, fatal, a, b, bytes, iters);
                t[1][r] = block(op, 1, fatal, a, b, bytes, iters);
                t[2][r] = block(op, 1, ret, a, b, bytes, iters);
                rf[r] = t[1][r] / t[0][r];
                rr[r] = t[2][r] / t[0][r];
            }
            if (rank == 0)
                printf("coll %s %d %.2f %.2f %.2f %.3f %.3f\n", names[op],
                       bytes, bench_median(t[0], reps), bench_median(t[1], reps),
                       bench_median(t[2], reps), bench_median(rf, reps),
                       bench_median(rr, reps));
            fflush(stdout);
        }
    MPI_Comm_free(&ret);
    MPI_Comm_free(&fatal);
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
