/*
 * Blocking collectives posted as the MPI's nonblocking ones (coll.h).
 *
 * ftwrap runs a blocking collective as the MPI's nonblocking form, so that
 * it can give the collective up when a member fails.  Where an MPI's
 * nonblocking form moves data differently from its blocking form on valid
 * arguments, the blocking wrapper posts it through one of these, which
 * adjusts the arguments so that the result is the blocking form's.  (The
 * zero-size blocks of all-to-all are ftw_coll_zero_types in coll.c.)
 *
 * Duplicate Cartesian neighbours: in a periodic dimension of one or two
 * processes the source and the destination are the same process, and MPI
 * (3.1 with the MPI-4.0 errata, 4.1 section 8.6) sends block 2d+1 of the
 * sender to block 2d of the receiver and block 2d to block 2d+1.  Open MPI
 * 4.1's nonblocking neighbourhood alltoalls pair the two messages in list
 * order instead (block s lands in block s).  Whether the MPI does is
 * probed once per call on a periodic ring of one process over
 * MPI_COMM_SELF; if it does, the receive blocks of every such dimension
 * are swapped, which undoes it.
 *
 * Adjusted arrays live in co->owned until the native request completes.
 */
#include "coll/coll.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "util/log.h"

static void *owned_alloc(ftw_coll_t *co, size_t bytes)
{
    co->owned = calloc(1, bytes ? bytes : 1);
    if (co->owned == NULL)
        ftw_error("%s: out of memory for %zu bytes of adjusted arguments",
                  co->name, bytes);
    return co->owned;
}

enum { NBR_ALLTOALL, NBR_ALLTOALLV, NBR_ALLTOALLW, NBR_FORMS };

/* Per form: -1 not probed yet, 1 the MPI pairs in list order, 0 not. */
static _Atomic int nbr_list_order[NBR_FORMS] = { -1, -1, -1 };

/* Post form on comm: send blocks {1, 2} of one int, receive 2 blocks. */
static int nbr_post(int form, MPI_Comm comm, const int *sbuf, int *rbuf,
                    MPI_Request *req)
{
    const int ones[2] = { 1, 1 }, displs[2] = { 0, 1 };
    const MPI_Aint bdispls[2] = { 0, sizeof(int) };
    const MPI_Datatype types[2] = { MPI_INT, MPI_INT };

    switch (form) {
    case NBR_ALLTOALL:
        return PMPI_Ineighbor_alltoall(sbuf, 1, MPI_INT, rbuf, 1, MPI_INT,
                                       comm, req);
    case NBR_ALLTOALLV:
        return PMPI_Ineighbor_alltoallv(sbuf, ones, displs, MPI_INT, rbuf,
                                        ones, displs, MPI_INT, comm, req);
    default:
        return PMPI_Ineighbor_alltoallw(sbuf, ones, bdispls, types, rbuf,
                                        ones, bdispls, types, comm, req);
    }
}

/* Does the MPI's nonblocking form pair duplicate neighbours in list
 * order?  Asked once, on a periodic ring of this process alone, where
 * block 0 must come back as block 1. */
static int nbr_pairs_in_list_order(int form)
{
    int known = atomic_load(&nbr_list_order[form]);
    int dims[1] = { 1 }, periods[1] = { 1 };
    int sbuf[2] = { 1, 2 }, rbuf[2] = { 0, 0 }, rc;
    MPI_Comm ring;
    MPI_Request req;

    if (known >= 0)
        return known;
    rc = PMPI_Cart_create(MPI_COMM_SELF, 1, dims, periods, 0, &ring);
    if (rc != MPI_SUCCESS)
        goto err;
    PMPI_Comm_set_errhandler(ring, MPI_ERRORS_RETURN);
    rc = nbr_post(form, ring, sbuf, rbuf, &req);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Wait(&req, MPI_STATUS_IGNORE);
    PMPI_Comm_free(&ring);
    if (rc != MPI_SUCCESS)
        goto err;
    known = rbuf[0] == 1 && rbuf[1] == 2;
    if (known)
        ftw_debug("the MPI's nonblocking neighbourhood alltoall (form %d) "
                  "pairs duplicate Cartesian neighbours in list order; "
                  "blocking calls swap their receive blocks", form);
    atomic_store(&nbr_list_order[form], known);
    return known;

err:
    ftw_warn("could not probe the MPI's neighbourhood alltoall (error %d); "
             "its nonblocking form is taken as is", rc);
    atomic_store(&nbr_list_order[form], 0);
    return 0;
}

/* The dimensions of comm whose source and destination are one process,
 * as a bit set (at most 31 dimensions are looked at), and the number of
 * neighbours (2 per dimension), in *nbrs_p; 0 if comm is not Cartesian or
 * has no such dimension. */
static unsigned cart_dup_dims(MPI_Comm comm, int *nbrs_p)
{
    int topo = MPI_UNDEFINED, ndims = 0, src, dst;
    unsigned dup = 0;

    PMPI_Topo_test(comm, &topo);
    if (topo != MPI_CART)
        return 0;
    PMPI_Cartdim_get(comm, &ndims);
    for (int d = 0; d < ndims && d < 31; d++) {
        PMPI_Cart_shift(comm, d, 1, &src, &dst);
        if (src == dst && src != MPI_PROC_NULL)
            dup |= 1u << d;
    }
    *nbrs_p = 2 * ndims;
    return dup;
}

/* The receive block that neighbour slot i must be posted to. */
static int slot_of(unsigned dup, int i)
{
    return (dup >> (i / 2)) & 1 ? i ^ 1 : i;
}

/* dup for a blocking neighbourhood alltoall of form on co->native: the
 * dimensions whose receive blocks are to be swapped, or 0. */
static unsigned nbr_swap_dims(ftw_coll_t *co, int form, int *nbrs_p)
{
    unsigned dup = cart_dup_dims(co->native, nbrs_p);

    return dup != 0 && nbr_pairs_in_list_order(form) ? dup : 0;
}

int ftw_coll_ineighbor_alltoall(ftw_coll_t *co, const void *sbuf,
                                int scount, MPI_Datatype stype, void *rbuf,
                                int rcount, MPI_Datatype rtype,
                                MPI_Request *req)
{
    int n = 0, *a;
    unsigned dup = nbr_swap_dims(co, NBR_ALLTOALL, &n);

    if (dup == 0 || (n > 1 && (scount > INT_MAX / (n - 1) ||
                               rcount > INT_MAX / (n - 1))))
        return PMPI_Ineighbor_alltoall(sbuf, scount, stype, rbuf, rcount,
                                       rtype, co->native, req);
    /* The v form, with the receive displacements swapped. */
    a = owned_alloc(co, sizeof(int) * 4 * (size_t)n);
    if (a == NULL)
        return MPI_ERR_NO_MEM;
    for (int i = 0; i < n; i++) {
        a[i] = scount;
        a[n + i] = i * scount;
        a[2 * n + i] = rcount;
        a[3 * n + i] = slot_of(dup, i) * rcount;
    }
    return PMPI_Ineighbor_alltoallv(sbuf, a, a + n, stype, rbuf, a + 2 * n,
                                    a + 3 * n, rtype, co->native, req);
}

int ftw_coll_ineighbor_alltoallv(ftw_coll_t *co, const void *sbuf,
                                 const int scounts[], const int sdispls[],
                                 MPI_Datatype stype, void *rbuf,
                                 const int rcounts[], const int rdispls[],
                                 MPI_Datatype rtype, MPI_Request *req)
{
    int n = 0, *a;
    unsigned dup = nbr_swap_dims(co, NBR_ALLTOALLV, &n);

    if (dup == 0)
        return PMPI_Ineighbor_alltoallv(sbuf, scounts, sdispls, stype, rbuf,
                                        rcounts, rdispls, rtype, co->native,
                                        req);
    a = owned_alloc(co, sizeof(int) * 2 * (size_t)n);
    if (a == NULL)
        return MPI_ERR_NO_MEM;
    for (int i = 0; i < n; i++) {
        a[i] = rcounts[slot_of(dup, i)];
        a[n + i] = rdispls[slot_of(dup, i)];
    }
    return PMPI_Ineighbor_alltoallv(sbuf, scounts, sdispls, stype, rbuf, a,
                                    a + n, rtype, co->native, req);
}

int ftw_coll_ineighbor_alltoallw(ftw_coll_t *co, const void *sbuf,
                                 const int scounts[], const MPI_Aint sdispls[],
                                 const MPI_Datatype stypes[], void *rbuf,
                                 const int rcounts[], const MPI_Aint rdispls[],
                                 const MPI_Datatype rtypes[],
                                 MPI_Request *req)
{
    int n = 0, *counts;
    unsigned dup = nbr_swap_dims(co, NBR_ALLTOALLW, &n);
    MPI_Aint *displs;
    MPI_Datatype *types;

    if (dup == 0)
        return PMPI_Ineighbor_alltoallw(sbuf, scounts, sdispls, stypes, rbuf,
                                        rcounts, rdispls, rtypes, co->native,
                                        req);
    /* Widest first: MPI_Aint, then the types, then the counts. */
    displs = owned_alloc(co, (sizeof(*displs) + sizeof(*types) +
                              sizeof(*counts)) * (size_t)n);
    if (displs == NULL)
        return MPI_ERR_NO_MEM;
    types = (MPI_Datatype *)(displs + n);
    counts = (int *)(types + n);
    for (int i = 0; i < n; i++) {
        counts[i] = rcounts[slot_of(dup, i)];
        displs[i] = rdispls[slot_of(dup, i)];
        types[i] = rtypes[slot_of(dup, i)];
    }
    return PMPI_Ineighbor_alltoallw(sbuf, scounts, sdispls, stypes, rbuf,
                                    counts, displs, types, co->native, req);
}
