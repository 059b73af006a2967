/*
 * survive - the computation of the cluster checks (tests/cluster.sh).
 *
 *   survive STEPS
 *
 * STEPS rounds of MPI_Allreduce of rank+1 over MPI_COMM_WORLD with
 * MPI_ERRORS_RETURN, 10 ms apart.  An error is answered with
 * FTW_Comm_validate and the round is repeated.  Every successful round's
 * sum must be the sum of rank+1 over the ranks not yet named failed by
 * the last validate (all ranks before any).  Each rank prints
 * "rank R: ok SUM ALIVE" or "rank R: WRONG ..." at the end and exits 0
 * only if every round was right.  A process declared failed while alive
 * (a partitioned host) is ended by ftwrap (exit 75) and prints nothing.
 *
 * After a validate the result buffer is replaced by a fresh one when
 * FTW_Buffer_quarantined says the failed round's abandoned collective may
 * still write it (ftwrap.h): after a partition heals, what the cut-off side
 * sent may still complete that collective.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ftwrap.h"

int main(int argc, char **argv)
{
    int rank, size, steps = argc > 1 ? atoi(argv[1]) : 300, wrong = 0;
    int nval = 0, *failed;
    long want, *sum = calloc(1, sizeof(*sum));

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    failed = calloc((size_t)size, sizeof(int));
    want = (long)size * (size + 1) / 2;
    for (int s = 0; s < steps; s++) {
        long v = rank + 1;
        int rc = MPI_Allreduce(&v, sum, 1, MPI_LONG, MPI_SUM,
                               MPI_COMM_WORLD);

        if (rc == MPI_SUCCESS) {
            if (*sum != want) {
                fprintf(stderr, "rank %d: step %d sum %ld, want %ld\n", rank,
                        s, *sum, want);
                wrong++;
            }
            usleep(10000);
            continue;
        }
        {
            MPI_Group fg, wg;
            int n = 0;

            if (FTW_Comm_validate(MPI_COMM_WORLD, &fg) != MPI_SUCCESS) {
                fprintf(stderr, "rank %d: validate failed\n", rank);
                wrong++;
                break;
            }
            nval++;
            MPI_Comm_group(MPI_COMM_WORLD, &wg);
            MPI_Group_size(fg, &n);
            for (int i = 0; i < n; i++) {
                int w = -1;

                MPI_Group_translate_ranks(fg, 1, &i, wg, &w);
                if (w >= 0 && w < size)
                    failed[w] = 1;
            }
            MPI_Group_free(&wg);
            MPI_Group_free(&fg);
            {
                int q = 0;

                FTW_Buffer_quarantined(sum, sizeof(*sum), &q);
                if (q)
                    sum = calloc(1, sizeof(*sum));  /* the old one is lost */
            }
            want = 0;
            for (int r = 0; r < size; r++)
                if (!failed[r])
                    want += r + 1;
            s--;
        }
    }
    {
        int alive = 0;

        for (int r = 0; r < size; r++)
            alive += !failed[r];
        if (wrong)
            printf("rank %d: WRONG (%d bad rounds)\n", rank, wrong);
        else
            printf("rank %d: ok %ld %d\n", rank, *sum, alive);
    }
    fflush(stdout);
    MPI_Finalize();
    free(failed);
    return wrong ? 1 : 0;
}
