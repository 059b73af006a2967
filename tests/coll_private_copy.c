/* ftw-test: np=4 mode=both timeout=60 */
/*
 * coll_private_copy - blocking collectives on a communicator whose error
 * handler returns run, under ftwrap, over a private copy of their output
 * span; what they deliver and what they leave alone must be exactly what
 * the MPI's own calls give.  Natively the same checks hold.
 *
 * On a duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN, twice each
 * (the second run reuses the first's copy):
 *  1 MPI_Allreduce, separate buffers and MPI_IN_PLACE;
 *  2 MPI_Reduce_scatter_block and MPI_Reduce_scatter in place (the input
 *    is wider than the output);
 *  3 MPI_Exscan: rank 0's buffer is left as it was;
 *  4 MPI_Gatherv with gaps between the blocks at the root: the gaps keep
 *    their bytes; MPI_Allgather in place;
 *  5 MPI_Bcast of 1 MiB (checksum) and MPI_Alltoall;
 *  6 a strided datatype (MPI_Type_vector) received by MPI_Allgather: the
 *    bytes between the elements keep theirs.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

#define BIG (1 << 20)

static int rank, size;
static MPI_Comm c;

static int allreduce_ok(void)
{
    int in[64], out[64], ok = 1;

    for (int i = 0; i < 64; i++)
        in[i] = rank * 64 + i;
    ok &= MPI_Allreduce(in, out, 64, MPI_INT, MPI_SUM, c) == MPI_SUCCESS;
    for (int i = 0; i < 64; i++)
        ok &= out[i] == 64 * size * (size - 1) / 2 + size * i;
    ok &= MPI_Allreduce(MPI_IN_PLACE, in, 64, MPI_INT, MPI_MAX, c) ==
          MPI_SUCCESS;
    for (int i = 0; i < 64; i++)
        ok &= in[i] == (size - 1) * 64 + i;
    return ok;
}

static int reduce_scatter_ok(void)
{
    int buf[4 * 16], counts[4], ok = 1;

    for (int i = 0; i < size * 16; i++)
        buf[i] = rank + i;
    ok &= MPI_Reduce_scatter_block(MPI_IN_PLACE, buf, 16, MPI_INT, MPI_SUM,
                                   c) == MPI_SUCCESS;
    for (int i = 0; i < 16; i++)
        ok &= buf[i] == size * (size - 1) / 2 + size * (rank * 16 + i);
    for (int i = 0; i < size * 16; i++)
        buf[i] = rank + i;
    for (int r = 0; r < size; r++)
        counts[r] = 16;
    ok &= MPI_Reduce_scatter(MPI_IN_PLACE, buf, counts, MPI_INT, MPI_SUM,
                             c) == MPI_SUCCESS;
    for (int i = 0; i < 16; i++)
        ok &= buf[i] == size * (size - 1) / 2 + size * (rank * 16 + i);
    return ok;
}

static int exscan_ok(void)
{
    int in = rank + 1, out = -7, ok;

    ok = MPI_Exscan(&in, &out, 1, MPI_INT, MPI_SUM, c) == MPI_SUCCESS;
    return ok && out == (rank == 0 ? -7 : rank * (rank + 1) / 2);
}

static int gatherv_ok(void)
{
    int mine[8], all[4 * 12], counts[4], displs[4], ok = 1;

    for (int i = 0; i < 8; i++)
        mine[i] = rank * 100 + i;
    for (int i = 0; i < size * 12; i++)
        all[i] = -1;
    for (int r = 0; r < size; r++) {
        counts[r] = 8;
        displs[r] = r * 12;
    }
    ok &= MPI_Gatherv(mine, 8, MPI_INT, all, counts, displs, MPI_INT, 0, c) ==
          MPI_SUCCESS;
    for (int r = 0; rank == 0 && r < size; r++)
        for (int i = 0; i < 12; i++)
            ok &= all[r * 12 + i] == (i < 8 ? r * 100 + i : -1);
    for (int r = 0; r < size; r++)
        all[r] = r == rank ? rank * 3 : -5;
    ok &= MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 1, MPI_INT,
                        c) == MPI_SUCCESS;
    for (int r = 0; r < size; r++)
        ok &= all[r] == r * 3;
    return ok;
}

static int bcast_alltoall_ok(char *big)
{
    int in[4], out[4], ok = 1;

    if (rank == 1)
        tap_fill(big, BIG, 77);
    else
        memset(big, 0, BIG);
    ok &= MPI_Bcast(big, BIG, MPI_BYTE, 1, c) == MPI_SUCCESS &&
          tap_check(big, BIG, 77);
    for (int r = 0; r < size; r++)
        in[r] = rank * 10 + r;
    ok &= MPI_Alltoall(in, 1, MPI_INT, out, 1, MPI_INT, c) == MPI_SUCCESS;
    for (int r = 0; r < size; r++)
        ok &= out[r] == r * 10 + rank;
    return ok;
}

static int strided_ok(void)
{
    MPI_Datatype every_other;
    int out[2 * 4 * 2], in[2], ok = 1;

    /* Two ints, every other one: each rank's block spans 3 ints. */
    MPI_Type_vector(2, 1, 2, MPI_INT, &every_other);
    MPI_Type_create_resized(every_other, 0, 4 * sizeof(int), &every_other);
    MPI_Type_commit(&every_other);
    for (int i = 0; i < 2 * 4 * 2; i++)
        out[i] = -3;
    in[0] = rank;
    in[1] = rank + 50;
    ok &= MPI_Allgather(in, 2, MPI_INT, out, 1, every_other, c) ==
          MPI_SUCCESS;
    for (int r = 0; r < size; r++)
        ok &= out[4 * r] == r && out[4 * r + 1] == -3 &&
              out[4 * r + 2] == r + 50 && out[4 * r + 3] == -3;
    MPI_Type_free(&every_other);
    return ok;
}

int main(int argc, char **argv)
{
    char *big;
    int ok[6] = { 1, 1, 1, 1, 1, 1 };

    MPI_Init(&argc, &argv);
    if (!tap_need_size(4))
        return 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    big = malloc(BIG);
    tap_plan(6);
    for (int round = 0; round < 2; round++) {
        ok[0] &= allreduce_ok();
        ok[1] &= reduce_scatter_ok();
        ok[2] &= exscan_ok();
        ok[3] &= gatherv_ok();
        ok[4] &= bcast_alltoall_ok(big);
        ok[5] &= strided_ok();
    }
    tap_ok(ok[0], "MPI_Allreduce, separate buffers and in place");
    tap_ok(ok[1], "MPI_Reduce_scatter_block and MPI_Reduce_scatter in "
           "place");
    tap_ok(ok[2], "MPI_Exscan leaves rank 0's buffer as it was");
    tap_ok(ok[3], "MPI_Gatherv keeps the gaps between blocks; "
           "MPI_Allgather in place");
    tap_ok(ok[4], "MPI_Bcast of 1 MiB (checksum) and MPI_Alltoall");
    tap_ok(ok[5], "a strided receive type keeps the bytes between its "
           "elements");
    free(big);
    MPI_Comm_free(&c);
    MPI_Finalize();
    return tap_status();
}
