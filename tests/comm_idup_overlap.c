/* ftw-test: np=4 mode=both timeout=60 */
/*
 * comm_idup_overlap - blocking communicator creations while nonblocking
 * duplicates of the same parent are pending, as MPICH's
 * comm/comm_idup_comm does.
 *
 * ROUNDS rounds, each on a fresh duplicate p of MPI_COMM_WORLD: NIDUP
 * MPI_Comm_idup(p) are started; while they are pending, MPI_Comm_dup(p)
 * and MPI_Comm_split(p, rank % 2, -rank) are made and used; then the
 * duplicates are completed with MPI_Waitall.  Asserted: every call returns
 * MPI_SUCCESS, an MPI_Allreduce over each new communicator gives the sum
 * of its members' world ranks (the split's in reverse rank order), and
 * every round ends (under ftwrap on Open MPI 4.1 a nonblocking collective
 * of ftwrap's on p could overtake a pending duplicate's and the next
 * context id was never agreed: the job hung).
 */
#include "tap.h"

#define ROUNDS 20
#define NIDUP 5

static int sum_is(MPI_Comm c, int want)
{
    int wrank = 0, sum = -1;

    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    return MPI_Allreduce(&wrank, &sum, 1, MPI_INT, MPI_SUM, c) ==
           MPI_SUCCESS && sum == want;
}

int main(int argc, char **argv)
{
    int rank, size, calls_ok = 1, dup_ok = 1, split_ok = 1, idup_ok = 1;
    int all = 0, half = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    tap_plan(4);
    for (int r = 0; r < size; r++) {
        all += r;
        half += r % 2 == rank % 2 ? r : 0;
    }
    for (int round = 0; round < ROUNDS; round++) {
        MPI_Comm p, idups[NIDUP], d, s;
        MPI_Request reqs[NIDUP];
        MPI_Status sts[NIDUP];
        int rc = MPI_Comm_dup(MPI_COMM_WORLD, &p);

        for (int i = 0; i < NIDUP; i++)
            rc |= MPI_Comm_idup(p, &idups[i], &reqs[i]);
        rc |= MPI_Comm_dup(p, &d);
        rc |= MPI_Comm_split(p, rank % 2, -rank, &s);
        calls_ok &= rc == MPI_SUCCESS;
        dup_ok &= sum_is(d, all);
        split_ok &= sum_is(s, half);
        if (s != MPI_COMM_NULL) {
            int srank = -1, ssize = 0;

            MPI_Comm_rank(s, &srank);
            MPI_Comm_size(s, &ssize);
            /* Keys -rank: the highest world rank first. */
            split_ok &= srank == ssize - 1 - rank / 2;
        }
        calls_ok &= MPI_Waitall(NIDUP, reqs, sts) ==
                    MPI_SUCCESS;
        for (int i = 0; i < NIDUP; i++) {
            idup_ok &= sum_is(idups[i], all);
            MPI_Comm_free(&idups[i]);
        }
        MPI_Comm_free(&d);
        MPI_Comm_free(&s);
        MPI_Comm_free(&p);
    }
    tap_ok(calls_ok, "%d rounds: MPI_Comm_dup and MPI_Comm_split with %d "
           "MPI_Comm_idup pending, and their MPI_Waitall, succeed", ROUNDS,
           NIDUP);
    tap_ok(dup_ok, "the duplicates made meanwhile sum every world rank");
    tap_ok(split_ok, "the splits made meanwhile have their color's members "
           "in key order");
    tap_ok(idup_ok, "every nonblocking duplicate works once complete");
    MPI_Finalize();
    return tap_status();
}
