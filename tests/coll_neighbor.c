/* ftw-test: np=4 mode=both timeout=60 */
/*
 * coll_neighbor - neighbourhood alltoalls on Cartesian communicators whose
 * periodic dimensions have one or two processes.
 *
 * In such a dimension a process's source and destination are one process
 * (itself, or the other one), and MPI says which block goes where: block
 * 2d+1 of the source (sent in the positive direction) lands in block 2d
 * of the receiver, block 2d of the destination in block 2d+1 (MPI-4.0
 * errata to MPI-3.1; MPI-4.1 section 8.6).  Asserts that blocking
 * MPI_Neighbor_alltoall, MPI_Neighbor_alltoallv and MPI_Neighbor_alltoallw
 * deliver exactly that on a periodic 2x2 grid (two processes per
 * dimension), a periodic 4x1 grid (one process in the second dimension:
 * a process is its own neighbour both ways) and a 2x2 grid periodic in
 * one dimension only (MPI_PROC_NULL neighbours leave their blocks alone).
 * (ftwrap runs blocking collectives on the MPI's nonblocking ones; Open
 * MPI 4.1's pair the two blocks in list order.)  MPICH 4.0's own blocking
 * alltoallv and alltoallw forms pair them in list order, so those checks
 * are skipped there.
 */
#include "tap.h"

#define PLAN 9
#define MAXN 8                  /* neighbours: 2 per dimension */
#define SENTINEL (-7)

static int rank;

/* The value rank r sends as its block b. */
static int value(int r, int b)
{
    return 1000 + r * 10 + b;
}

/* rbuf holds what MPI defines for comm, n = 2 * ndims blocks. */
static int expected(MPI_Comm comm, int n, const int *rbuf)
{
    for (int d = 0; d < n / 2; d++) {
        int src, dst;

        MPI_Cart_shift(comm, d, 1, &src, &dst);
        if (rbuf[2 * d] != (src == MPI_PROC_NULL ? SENTINEL
                                                 : value(src, 2 * d + 1)))
            return 0;
        if (rbuf[2 * d + 1] != (dst == MPI_PROC_NULL ? SENTINEL
                                                     : value(dst, 2 * d)))
            return 0;
    }
    return 1;
}

static void run(MPI_Comm comm, const char *what)
{
    int n, sbuf[MAXN], rbuf[MAXN], c[MAXN], d[MAXN], err;
    MPI_Aint bd[MAXN];
    MPI_Datatype t[MAXN];

    MPI_Cartdim_get(comm, &n);
    n *= 2;
    for (int i = 0; i < n; i++) {
        sbuf[i] = value(rank, i);
        c[i] = 1;
        d[i] = i;
        bd[i] = (MPI_Aint)(i * sizeof(int));
        t[i] = MPI_INT;
    }
    for (int i = 0; i < n; i++)
        rbuf[i] = SENTINEL;
    err = MPI_Neighbor_alltoall(sbuf, 1, MPI_INT, rbuf, 1, MPI_INT, comm);
    tap_ok(err == MPI_SUCCESS && expected(comm, n, rbuf),
           "neighbor_alltoall on %s", what);
    for (int i = 0; i < n; i++)
        rbuf[i] = SENTINEL;
#ifdef MPICH
    tap_ok_local(1, "neighbor_alltoallv and alltoallw on %s # SKIP MPICH "
                 "4.0's blocking forms pair duplicate neighbours in list "
                 "order", what);
    tap_ok_local(1, "(the same) # SKIP");
    return;
#endif
    err = MPI_Neighbor_alltoallv(sbuf, c, d, MPI_INT, rbuf, c, d, MPI_INT,
                                 comm);
    tap_ok(err == MPI_SUCCESS && expected(comm, n, rbuf),
           "neighbor_alltoallv on %s", what);
    for (int i = 0; i < n; i++)
        rbuf[i] = SENTINEL;
    err = MPI_Neighbor_alltoallw(sbuf, c, bd, t, rbuf, c, bd, t, comm);
    tap_ok(err == MPI_SUCCESS && expected(comm, n, rbuf),
           "neighbor_alltoallw on %s", what);
}

static void grid(int d0, int d1, int p0, int p1, const char *what)
{
    int dims[2] = { d0, d1 }, periods[2] = { p0, p1 };
    MPI_Comm cart;

    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
    run(cart, what);
    MPI_Comm_free(&cart);
}

int main(int argc, char **argv)
{
    int size;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 4) {
        tap_plan(0);
        tap_diag("needs 4 processes");
        MPI_Finalize();
        return 1;
    }
    tap_plan(PLAN);
    grid(2, 2, 1, 1, "a periodic 2x2 grid");
    grid(4, 1, 1, 1, "a periodic 4x1 grid");
    grid(2, 2, 1, 0, "a 2x2 grid periodic in dimension 0");
    MPI_Finalize();
    return tap_status();
}
