/*
 * create - what ftwrap adds to communicator creation and release, measured
 * inside one job.
 *
 * Run under ftwrap.  Three patterns, each a creation followed by its free:
 * MPI_Comm_dup of MPI_COMM_WORLD, MPI_Comm_split of it (two colours) and
 * MPI_Comm_create_group over all of it.  For each, blocks of ITERS pairs
 * alternate between the MPI's own calls (PMPI_*: what the program would
 * get without ftwrap) and the interposed ones (MPI_*: through ftwrap); the
 * times are the medians over REPS blocks, the ratio the median of the
 * ratios of neighbouring blocks.  Then one long run of TOTAL
 * pairs through ftwrap, timed per chunk of TOTAL/10, shows whether the
 * cost grows with the number of communicators ever created.  Every new
 * communicator is checked (size, rank) so nothing is skipped.
 *
 *   create [--iters N] [--reps R] [--total T]
 * prints, per pattern,
 *   "create <name> <native_us> <ftwrap_us> <ratio>"
 *   "growth <name> <us of chunk 1> ... <us of chunk 10> <last/first>"
 * (last/first: the median of the last three chunks over that of the first
 * three)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*dup_fn)(MPI_Comm, MPI_Comm *);
typedef int (*split_fn)(MPI_Comm, int, int, MPI_Comm *);
typedef int (*cgroup_fn)(MPI_Comm, MPI_Group, int, MPI_Comm *);
typedef int (*free_fn)(MPI_Comm *);

struct calls {
    dup_fn dup;
    split_fn split;
    cgroup_fn cgroup;
    free_fn cfree;
};

static const struct calls native = { PMPI_Comm_dup, PMPI_Comm_split,
                                     PMPI_Comm_create_group, PMPI_Comm_free };
static const struct calls wrapped = { MPI_Comm_dup, MPI_Comm_split,
                                      MPI_Comm_create_group, MPI_Comm_free };

enum { P_DUP, P_SPLIT, P_CGROUP, NPAT };
static const char *const pat_name[NPAT] = { "dup", "split", "create_group" };

static int rank, size;
static MPI_Group world_group;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* One creation and free with the calls of k; 0 if the new communicator
 * is not what was asked for. */
static int one(const struct calls *k, int pat)
{
    MPI_Comm nc = MPI_COMM_NULL;
    int r = -1, n = -1, want_n = size, want_r = rank;

    switch (pat) {
    case P_DUP:
        k->dup(MPI_COMM_WORLD, &nc);
        break;
    case P_SPLIT:
        k->split(MPI_COMM_WORLD, rank % 2, rank, &nc);
        want_n = size / 2 + (size % 2 && rank % 2 == 0);
        want_r = rank / 2;
        break;
    case P_CGROUP:
        k->cgroup(MPI_COMM_WORLD, world_group, 7, &nc);
        break;
    }
    if (nc == MPI_COMM_NULL)
        return 0;
    PMPI_Comm_size(nc, &n);
    PMPI_Comm_rank(nc, &r);
    k->cfree(&nc);
    return n == want_n && r == want_r;
}

/* Microseconds per pair over iters pairs. */
static double block(const struct calls *k, int pat, int iters)
{
    double t0;
    int ok = 1;

    PMPI_Barrier(MPI_COMM_WORLD);
    t0 = PMPI_Wtime();
    for (int i = 0; i < iters; i++)
        ok &= one(k, pat);
    t0 = (PMPI_Wtime() - t0) * 1e6 / iters;
    if (!ok) {
        fprintf(stderr, "create: rank %d: a %s communicator was wrong\n",
                rank, pat_name[pat]);
        PMPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* Rank 0 reports the slowest rank's time. */
    PMPI_Allreduce(MPI_IN_PLACE, &t0, 1, MPI_DOUBLE, MPI_MAX,
                   MPI_COMM_WORLD);
    return t0;
}

int main(int argc, char **argv)
{
    int iters = 1000, reps = 7, total = 100000;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--iters"))
            iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--total"))
            total = atoi(argv[i + 1]);
    }
    MPI_Init(&argc, &argv);
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    PMPI_Comm_group(MPI_COMM_WORLD, &world_group);
    for (int pat = 0; pat < NPAT; pat++) {
        double *t[3];

        for (int m = 0; m < 3; m++)
            t[m] = malloc(sizeof(double) * (size_t)reps);
        block(&native, pat, iters / 10 + 1);    /* warm-up */
        block(&wrapped, pat, iters / 10 + 1);
        for (int r = 0; r < reps; r++) {
            t[0][r] = block(&native, pat, iters);
            t[1][r] = block(&wrapped, pat, iters);
            /* Neighbouring blocks saw the same machine: their ratio
             * does not drift with it as the times do. */
            t[2][r] = t[1][r] / t[0][r];
        }
        for (int m = 0; m < 3; m++)
            qsort(t[m], (size_t)reps, sizeof(double), cmp_double);
        if (rank == 0)
            printf("create %s %.2f %.2f %.3f\n", pat_name[pat],
                   t[0][reps / 2], t[1][reps / 2], t[2][reps / 2]);
        fflush(stdout);
        for (int m = 0; m < 3; m++)
            free(t[m]);
    }
    for (int pat = 0; pat < NPAT && total >= 10; pat++) {
        double chunk[10], first[3], last[3];

        if (rank == 0)
            printf("growth %s", pat_name[pat]);
        for (int c = 0; c < 10; c++) {
            chunk[c] = block(&wrapped, pat, total / 10);
            if (rank == 0)
                printf(" %.2f", chunk[c]);
        }
        /* The medians of the first and last three chunks: one chunk the
         * machine slowed does not pass for growth. */
        memcpy(first, chunk, sizeof(first));
        memcpy(last, chunk + 7, sizeof(last));
        qsort(first, 3, sizeof(double), cmp_double);
        qsort(last, 3, sizeof(double), cmp_double);
        if (rank == 0)
            printf(" %.3f\n", last[1] / first[1]);
        fflush(stdout);
    }
    PMPI_Group_free(&world_group);
    MPI_Finalize();
    return 0;
}
