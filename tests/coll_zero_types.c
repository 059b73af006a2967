/* ftw-test: np=4 mode=both timeout=60 */
/*
 * coll_zero_types - all-to-all with zero-size datatypes completes.
 *
 * A datatype of size 0 moves nothing whatever its count, so a send of 5
 * elements of it matches a receive of 0 ints.  MPI_Alltoallv and
 * MPI_Alltoallw are called with every rank sending nonzero counts of a
 * zero-size type and receiving zero counts of MPI_INT, then the reverse,
 * then with MPI_IN_PLACE; a last MPI_Alltoallw mixes them: to each peer
 * one int with a checksummed value, plus zero-size blocks elsewhere.
 * Asserts that every call returns MPI_SUCCESS (within the test's time
 * limit: a receive posted for the zero-size blocks would never match),
 * that buffers receiving nothing keep their canary, and that the real
 * data arrive intact.
 */
#include "tap.h"

#define CANARY (-777)

static int rank, size;

static int untouched(const int *buf, int n)
{
    for (int i = 0; i < n; i++)
        if (buf[i] != CANARY)
            return 0;
    return 1;
}

int main(int argc, char **argv)
{
    MPI_Datatype empty;
    int *cnt_n, *cnt_0, *displ, *recv, *send, rc1, rc2, rc3, ok;
    MPI_Datatype *t_empty, *t_int, *t_mix_s, *t_mix_r;
    int *cnt_mix;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    tap_plan(4);
    MPI_Type_contiguous(0, MPI_INT, &empty);
    MPI_Type_commit(&empty);
    cnt_n = malloc(sizeof(int) * (size_t)size);
    cnt_0 = calloc((size_t)size, sizeof(int));
    cnt_mix = malloc(sizeof(int) * (size_t)size);
    displ = malloc(sizeof(int) * (size_t)size);
    recv = malloc(sizeof(int) * (size_t)size);
    send = malloc(sizeof(int) * (size_t)size);
    t_empty = malloc(sizeof(MPI_Datatype) * (size_t)size);
    t_int = malloc(sizeof(MPI_Datatype) * (size_t)size);
    t_mix_s = malloc(sizeof(MPI_Datatype) * (size_t)size);
    t_mix_r = malloc(sizeof(MPI_Datatype) * (size_t)size);
    for (int i = 0; i < size; i++) {
        cnt_n[i] = 5;
        displ[i] = (int)(i * sizeof(int));
        t_empty[i] = empty;
        t_int[i] = MPI_INT;
        recv[i] = CANARY;
    }

    /* Alltoallv: displacements in elements. */
    for (int i = 0; i < size; i++)
        displ[i] = i;
    rc1 = MPI_Alltoallv(send, cnt_n, displ, empty, recv, cnt_0, displ,
                        MPI_INT, MPI_COMM_WORLD);
    rc2 = MPI_Alltoallv(send, cnt_0, displ, MPI_INT, recv, cnt_n, displ,
                        empty, MPI_COMM_WORLD);
    tap_ok(rc1 == MPI_SUCCESS && rc2 == MPI_SUCCESS && untouched(recv, size),
           "MPI_Alltoallv: 5 zero-size elements against 0 ints, both ways; "
           "nothing written");

    /* Alltoallw: displacements in bytes. */
    for (int i = 0; i < size; i++)
        displ[i] = (int)(i * sizeof(int));
    rc1 = MPI_Alltoallw(send, cnt_n, displ, t_empty, recv, cnt_0, displ,
                        t_int, MPI_COMM_WORLD);
    rc2 = MPI_Alltoallw(send, cnt_0, displ, t_int, recv, cnt_n, displ,
                        t_empty, MPI_COMM_WORLD);
    rc3 = MPI_Alltoallw(MPI_IN_PLACE, NULL, NULL, NULL, recv, cnt_n, displ,
                        t_empty, MPI_COMM_WORLD);
    tap_ok(rc1 == MPI_SUCCESS && rc2 == MPI_SUCCESS && rc3 == MPI_SUCCESS &&
           untouched(recv, size),
           "MPI_Alltoallw: the same, and with MPI_IN_PLACE; nothing written");

    /* Mixed: a real int to and from every peer (checksummed), zero-size
     * blocks with nonzero counts to and from odd peers besides. */
    for (int i = 0; i < size; i++) {
        send[i] = 1000 * rank + i;
        cnt_mix[i] = 1;
        t_mix_s[i] = MPI_INT;
        t_mix_r[i] = MPI_INT;
    }
    rc1 = MPI_Alltoallw(send, cnt_mix, displ, t_mix_s, recv, cnt_mix, displ,
                        t_mix_r, MPI_COMM_WORLD);
    ok = rc1 == MPI_SUCCESS;
    for (int i = 0; i < size; i++)
        ok &= recv[i] == 1000 * i + rank;
    tap_ok(ok, "MPI_Alltoallw of one int each way: every value intact");

    for (int i = 0; i < size; i++) {
        recv[i] = CANARY;
        cnt_mix[i] = i % 2 ? 3 : 0;
        t_mix_s[i] = i % 2 ? empty : MPI_INT;
        t_mix_r[i] = rank % 2 ? empty : MPI_INT;
    }
    /* Rank r receives from every peer cnt_mix[r] elements of its own
     * t_mix_r type: 3 zero-size ones for odd r, 0 ints for even r, which
     * matches what every peer sends it. */
    for (int i = 0; i < size; i++)
        cnt_n[i] = rank % 2 ? 3 : 0;
    for (int i = 0; i < size; i++)
        t_int[i] = t_mix_r[i];
    rc1 = MPI_Alltoallw(send, cnt_mix, displ, t_mix_s, recv, cnt_n, displ,
                        t_int, MPI_COMM_WORLD);
    tap_ok(rc1 == MPI_SUCCESS && untouched(recv, size),
           "MPI_Alltoallw mixing zero-size and empty blocks per peer: "
           "completes, nothing written");

    MPI_Type_free(&empty);
    free(cnt_n);
    free(cnt_0);
    free(cnt_mix);
    free(displ);
    free(recv);
    free(send);
    free(t_empty);
    free(t_int);
    free(t_mix_s);
    free(t_mix_r);
    MPI_Finalize();
    return tap_status();
}
