/* ftw-test: np=2 mode=both timeout=60 env=FTW_RNDV_THRESHOLD=1k env=FTW_XPORT=cma */
/*
 * rndv_bottom - messages described by absolute addresses (MPI_BOTTOM and
 * a struct type of MPI_Get_address displacements) with ftwrap's
 * rendezvous on: MPICH refuses MPI_BOTTOM as a null pointer in MPI_Pack
 * and MPI_Unpack, which ftwrap uses for non-contiguous rendezvous
 * messages and for small messages received through its scratch header.
 *
 * Asserts, rank 0 sending to rank 1, both sides MPI_BOTTOM with a type of
 * two blocks, ints then doubles, where the doubles lie just below the ints
 * in memory (a type without gaps whose bytes are not in address order:
 * ftwrap must not take it for a contiguous buffer):
 *  - a large message (600 ints and 300 doubles, past the 1 KiB
 *    threshold): every value right, MPI_Get_count 1, MPI_Get_elements
 *    900;
 *  - a small message (1 int and 1 double: 12 bytes, smaller than an RTS
 *    header): both values right;
 *  - the same with MPI_Sendrecv_replace of the large type (packed from
 *    MPI_BOTTOM before the receive overwrites it): rank 1's values come
 *    back to rank 0, rank 0's reach rank 1.
 */
#include "tap.h"

#include <stdlib.h>

#define NI 600
#define ND 300

static int rank;
/* The doubles lie below the ints, with no gap: the type (ints first)
 * spans its bytes without holes, but not in address order. */
static struct {
    double d[ND];
    int i[NI];
} mem;
#define ints mem.i
#define dbls mem.d

static MPI_Datatype abs_type(int ni, int nd)
{
    MPI_Datatype t, types[2] = { MPI_INT, MPI_DOUBLE };
    MPI_Aint disp[2];
    int len[2] = { ni, nd };

    MPI_Get_address(ints, &disp[0]);
    MPI_Get_address(dbls, &disp[1]);
    MPI_Type_create_struct(2, len, disp, types, &t);
    MPI_Type_commit(&t);
    return t;
}

static void fill(int who, int ni, int nd)
{
    for (int i = 0; i < ni; i++)
        ints[i] = who * 100000 + i;
    for (int i = 0; i < nd; i++)
        dbls[i] = who * 1000.0 + i * 0.5;
}

static int check(int who, int ni, int nd)
{
    for (int i = 0; i < ni; i++)
        if (ints[i] != who * 100000 + i)
            return 0;
    for (int i = 0; i < nd; i++)
        if (dbls[i] != who * 1000.0 + i * 0.5)
            return 0;
    return 1;
}

static int one_way(int ni, int nd)
{
    MPI_Datatype t = abs_type(ni, nd);
    MPI_Status st;
    int ok = 1, count = -1, elems = -1;

    if (rank == 0) {
        fill(0, ni, nd);
        ok = MPI_Send(MPI_BOTTOM, 1, t, 1, 5, MPI_COMM_WORLD) == MPI_SUCCESS;
    } else {
        fill(9, ni, nd);
        ok = MPI_Recv(MPI_BOTTOM, 1, t, 0, 5, MPI_COMM_WORLD, &st) ==
             MPI_SUCCESS;
        MPI_Get_count(&st, t, &count);
        MPI_Get_elements(&st, t, &elems);
        ok = ok && check(0, ni, nd) && count == 1 && elems == ni + nd;
        if (!ok)
            tap_diag("%d ints, %d doubles: count %d, elements %d", ni, nd,
                     count, elems);
    }
    MPI_Type_free(&t);
    return ok;
}

static int replace(void)
{
    MPI_Datatype t = abs_type(NI, ND);
    int ok;

    fill(rank, NI, ND);
    ok = MPI_Sendrecv_replace(MPI_BOTTOM, 1, t, 1 - rank, 6, 1 - rank, 6,
                              MPI_COMM_WORLD, MPI_STATUS_IGNORE) ==
         MPI_SUCCESS;
    ok = ok && check(1 - rank, NI, ND);
    MPI_Type_free(&t);
    return ok;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    tap_plan(3);
    tap_ok(one_way(NI, ND), "MPI_BOTTOM, %d ints + %d doubles (rendezvous): "
           "values, count, elements", NI, ND);
    tap_ok(one_way(1, 1), "MPI_BOTTOM, 1 int + 1 double (scratch header): "
           "values");
    tap_ok(replace(), "MPI_Sendrecv_replace from and to MPI_BOTTOM: values "
           "swapped");
    MPI_Finalize();
    return tap_status();
}
