/*
 * Collectives after a validate that excluded failed ranks (coll.h).
 *
 * The application keeps its rank numbers and buffer layouts over c->size
 * ranks; the native communicator holds only the c->nsurv survivors.  Each
 * call here posts the nonblocking native collective with translated
 * arguments: roots become survivor ranks, rank-indexed collectives become
 * their v/w forms whose counts and displacements put every survivor's
 * block at its user rank's place, so that the failed ranks' slots are
 * neither read nor written.  Reduce_scatter packs the survivors' blocks
 * of the send buffer into a temporary.  Everything the native request
 * reads after the post lives in one block at co->owned.
 */
#include "coll/coll.h"

#include <limits.h>
#include <stdlib.h>

#include "ftwrap.h"
#include "core/types.h"
#include "util/log.h"

/* ---- owned memory ------------------------------------------------------ */

/* One block for the native request to keep, at co->owned. */
static void *owned_alloc(ftw_coll_t *co, size_t bytes)
{
    co->owned = malloc(bytes ? bytes : 1);
    if (co->owned == NULL)
        ftw_error("%s: out of memory for %zu bytes of translated arguments",
                  co->name, bytes);
    return co->owned;
}

static int *owned_ints(ftw_coll_t *co, int n)
{
    return owned_alloc(co, sizeof(int) * (size_t)n);
}

/* The end of a translated post that returned rc: on error nothing is
 * posted, so nothing keeps the owned memory. */
static int xcoll_done(ftw_coll_t *co, int rc)
{
    if (rc != MPI_SUCCESS) {
        free(co->owned);
        co->owned = NULL;
    }
    return rc;
}

#define XROOT_OUT INT_MIN       /* xcoll_root: the root was excluded */

/* The survivor rank of root, or XROOT_OUT (logged) if it was excluded; an
 * intercommunicator's MPI_ROOT and MPI_PROC_NULL stay. */
static int xcoll_root(const ftw_coll_t *co, int root)
{
    int sroot;

    if (co->c->is_inter && (root == MPI_ROOT || root == MPI_PROC_NULL))
        return root;
    sroot = ftw_coll_rank(co, root);
    if (sroot >= 0)
        return sroot;
    ftw_debug("%s: root %d was excluded as failed", co->name, root);
    return XROOT_OUT;
}

/* Reduce-scatter over an intercommunicator's survivors: its counts are
 * indexed by the local group, whose exclusions this layer does not
 * translate. */
static int xcoll_inter_unsupported(const ftw_coll_t *co)
{
    ftw_error("%s on an intercommunicator after a validate that excluded "
              "processes is not supported", co->name);
    return MPI_ERR_UNSUPPORTED_OPERATION;
}

/* ---- layouts ----------------------------------------------------------- */

/* Every survivor gets count elements at its user rank's block of a
 * plain (non-v) collective: displacement user rank * count. */
static int layout_plain(const ftw_coll_t *co, int count, int counts[],
                        int displs[])
{
    const ftw_comm_t *c = co->c;
    int s;

    if (count > 0 && c->size - 1 > INT_MAX / count) {
        ftw_error("%s: %d ranks of %d elements overflow a displacement",
                  co->name, c->size, count);
        return MPI_ERR_COUNT;
    }
    for (s = 0; s < c->nsurv; s++) {
        counts[s] = count;
        displs[s] = c->surv[s] * count;
    }
    return MPI_SUCCESS;
}

/* The survivors' entries of the user's per-rank counts and displs. */
static void layout_pick(const ftw_comm_t *c, const int counts[],
                        const int displs[], int counts_out[],
                        int displs_out[])
{
    int s;

    for (s = 0; s < c->nsurv; s++) {
        counts_out[s] = counts[c->surv[s]];
        displs_out[s] = displs[c->surv[s]];
    }
}

static void types_pick(const ftw_comm_t *c, const MPI_Datatype types[],
                       MPI_Datatype types_out[])
{
    int s;

    for (s = 0; s < c->nsurv; s++)
        types_out[s] = types[c->surv[s]];
}

/* ---- copies by datatype ------------------------------------------------ */

/* The bytes n elements of dt starting at offset 0 touch: [*lo_p, *hi_p)
 * (ftw_type_span). */
static int type_span(MPI_Datatype dt, MPI_Aint n, MPI_Aint *lo_p,
                     MPI_Aint *hi_p)
{
    MPI_Count lo, hi;
    int rc = ftw_type_span(dt, n, &lo, &hi);

    *lo_p = (MPI_Aint)lo;
    *hi_p = (MPI_Aint)hi;
    return rc;
}

/* Copy n elements of dt src -> dst through a pack buffer of psize bytes:
 * exact for any datatype, leaving its gaps alone. */
static int type_copy(const ftw_coll_t *co, MPI_Datatype dt, const void *src,
                     void *dst, int n, void *pbuf, int psize)
{
    int pos = 0, rc;

    if (n == 0)
        return MPI_SUCCESS;
    rc = PMPI_Pack(src, n, dt, pbuf, psize, &pos, co->native);
    if (rc != MPI_SUCCESS)
        return rc;
    pos = 0;
    return PMPI_Unpack(pbuf, psize, &pos, dst, n, dt, co->native);
}

static void *pack_buffer(const ftw_coll_t *co, int psize)
{
    void *pbuf = malloc(psize > 0 ? (size_t)psize : 1);

    if (pbuf == NULL)
        ftw_error("%s: out of memory for a %d-byte pack buffer", co->name,
                  psize);
    return pbuf;
}

/* Offset of the data after a head of head bytes in an owned block. */
static size_t data_offset(size_t head)
{
    const size_t align = 16;

    return (head + align - 1) / align * align;
}

/* ---- packing the survivors' blocks (reduce_scatter) -------------------- */

/* One block per user rank, in rank order: counts[r] elements of dt, or
 * block elements each if counts is NULL. */
typedef struct {
    const int *counts;
    int block;
    MPI_Datatype dt;
    MPI_Aint extent;
} blocks_t;

static int blocks_count(const blocks_t *b, int r)
{
    return b->counts != NULL ? b->counts[r] : b->block;
}

static int blocks_init(blocks_t *b, const int counts[], int block,
                       MPI_Datatype dt)
{
    MPI_Aint lb;

    b->counts = counts;
    b->block = block;
    b->dt = dt;
    return PMPI_Type_get_extent(dt, &lb, &b->extent);
}

/* Elements in the survivors' blocks (*total_p) and in the largest. */
static void blocks_size(const ftw_coll_t *co, const blocks_t *b,
                        MPI_Aint *total_p, int *max_p)
{
    int r, n;

    *total_p = 0;
    *max_p = 0;
    for (r = 0; r < co->c->size; r++) {
        n = blocks_count(b, r);
        if (co->c->surv_of[r] < 0)
            continue;
        *total_p += n;
        if (n > *max_p)
            *max_p = n;
    }
}

/* Copy the survivors' blocks of src one after another to dst, taking
 * each from its user rank's place. */
static int blocks_gather(const ftw_coll_t *co, const blocks_t *b,
                         const char *src, char *dst, void *pbuf, int psize)
{
    MPI_Aint from = 0, to = 0;
    int r, n, rc;

    for (r = 0; r < co->c->size; r++) {
        n = blocks_count(b, r);
        if (co->c->surv_of[r] >= 0) {
            rc = type_copy(co, b->dt, src + from * b->extent,
                           dst + to * b->extent, n, pbuf, psize);
            if (rc != MPI_SUCCESS)
                return rc;
            to += n;
        }
        from += n;
    }
    return MPI_SUCCESS;
}

/* Pack the survivors' blocks of src into owned memory that also holds
 * nints ints (*ints_p); *buf_p gets the packed buffer as the native call
 * takes it (where its first element starts). */
static int blocks_pack(ftw_coll_t *co, const blocks_t *b, const void *src,
                       int nints, void **buf_p, int **ints_p)
{
    size_t head = sizeof(int) * (size_t)nints, off = data_offset(head);
    MPI_Aint total, lo, hi;
    void *pbuf;
    int max, psize, rc;

    blocks_size(co, b, &total, &max);
    rc = type_span(b->dt, total, &lo, &hi);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Pack_size(max, b->dt, co->native, &psize);
    if (rc != MPI_SUCCESS)
        return rc;
    pbuf = pack_buffer(co, psize);
    if (pbuf == NULL)
        return MPI_ERR_NO_MEM;
    rc = MPI_ERR_NO_MEM;
    if (owned_alloc(co, off + (size_t)(hi - lo)) == NULL)
        goto err_free_pbuf;
    rc = blocks_gather(co, b, src, (char *)co->owned + off - lo, pbuf,
                       psize);
    if (rc != MPI_SUCCESS)
        goto err_free_owned;
    free(pbuf);
    *buf_p = (char *)co->owned + off - lo;
    *ints_p = co->owned;
    return MPI_SUCCESS;

err_free_owned:
    xcoll_done(co, rc);
err_free_pbuf:
    free(pbuf);
    return rc;
}

/* ---- in-place alltoallw ------------------------------------------------ */

/* The bytes of rbuf the survivors' blocks touch, [*lo_p, *hi_p), and the
 * pack buffer the largest needs. */
static int w_span(const ftw_coll_t *co, const int counts[],
                  const int displs[], const MPI_Datatype types[],
                  MPI_Aint *lo_p, MPI_Aint *hi_p, int *psize_p)
{
    MPI_Aint lo = 0, hi = 0, l, h;
    int s, r, psize, rc, any = 0;

    *psize_p = 0;
    for (s = 0; s < co->c->nsurv; s++) {
        r = co->c->surv[s];
        if (counts[r] == 0)
            continue;
        rc = type_span(types[r], counts[r], &l, &h);
        if (rc == MPI_SUCCESS)
            rc = PMPI_Pack_size(counts[r], types[r], co->native, &psize);
        if (rc != MPI_SUCCESS)
            return rc;
        if (!any || displs[r] + l < lo)
            lo = displs[r] + l;
        if (!any || displs[r] + h > hi)
            hi = displs[r] + h;
        if (psize > *psize_p)
            *psize_p = psize;
        any = 1;
    }
    *lo_p = lo;
    *hi_p = hi;
    return MPI_SUCCESS;
}

/* Copy the survivors' blocks of rbuf to the same byte displacements from
 * sbuf. */
static int w_copy(const ftw_coll_t *co, const int counts[],
                  const int displs[], const MPI_Datatype types[],
                  const char *rbuf, char *sbuf, int psize)
{
    void *pbuf = pack_buffer(co, psize);
    int s, r, rc = MPI_SUCCESS;

    if (pbuf == NULL)
        return MPI_ERR_NO_MEM;
    for (s = 0; s < co->c->nsurv && rc == MPI_SUCCESS; s++) {
        r = co->c->surv[s];
        rc = type_copy(co, types[r], rbuf + displs[r], sbuf + displs[r],
                       counts[r], pbuf, psize);
    }
    free(pbuf);
    return rc;
}

/* MPICH 4.0.2's in-place Ialltoallw fails (message truncated) when the
 * types differ between peers, so the survivors' blocks are copied out of
 * rbuf and sent from the copy, with the receive layout on both sides. */
static int alltoallw_inplace(ftw_coll_t *co, void *rbuf,
                             const int rcounts[], const int rdispls[],
                             const MPI_Datatype rtypes[], MPI_Request *req)
{
    int n = co->c->nsurv, psize, *a, rc;
    size_t off = data_offset((sizeof(MPI_Datatype) + 2 * sizeof(int)) *
                             (size_t)n);
    MPI_Aint lo, hi;
    MPI_Datatype *t;
    char *sbuf;

    rc = w_span(co, rcounts, rdispls, rtypes, &lo, &hi, &psize);
    if (rc != MPI_SUCCESS)
        return rc;
    t = owned_alloc(co, off + (size_t)(hi - lo));
    if (t == NULL)
        return MPI_ERR_NO_MEM;
    a = (int *)(t + n);
    sbuf = (char *)co->owned + off - lo;
    types_pick(co->c, rtypes, t);
    layout_pick(co->c, rcounts, rdispls, a, a + n);
    rc = w_copy(co, rcounts, rdispls, rtypes, rbuf, sbuf, psize);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Ialltoallw(sbuf, a, a + n, t, rbuf, a, a + n, t,
                             co->native, req);
    return xcoll_done(co, rc);
}

/* ---- the collectives --------------------------------------------------- */

int ftw_xcoll_ibarrier(ftw_coll_t *co, MPI_Request *req)
{
    return PMPI_Ibarrier(co->native, req);
}

int ftw_xcoll_ibcast(ftw_coll_t *co, void *buf, int count, MPI_Datatype dt,
                     int root, MPI_Request *req)
{
    int sroot = xcoll_root(co, root);

    if (sroot == XROOT_OUT)
        return FTW_ERR_PROC_FAIL_STOP;
    return PMPI_Ibcast(buf, count, dt, sroot, co->native, req);
}

/* MPI_IN_PLACE at the root means the same on the survivors' comm. */
int ftw_xcoll_ireduce(ftw_coll_t *co, const void *sbuf, void *rbuf,
                      int count, MPI_Datatype dt, MPI_Op op, int root,
                      MPI_Request *req)
{
    int sroot = xcoll_root(co, root);

    if (sroot == XROOT_OUT)
        return FTW_ERR_PROC_FAIL_STOP;
    return PMPI_Ireduce(sbuf, rbuf, count, dt, op, sroot, co->native, req);
}

int ftw_xcoll_iallreduce(ftw_coll_t *co, const void *sbuf, void *rbuf,
                         int count, MPI_Datatype dt, MPI_Op op,
                         MPI_Request *req)
{
    return PMPI_Iallreduce(sbuf, rbuf, count, dt, op, co->native, req);
}

/* Over the survivors in rank order. */
int ftw_xcoll_iscan(ftw_coll_t *co, const void *sbuf, void *rbuf, int count,
                    MPI_Datatype dt, MPI_Op op, MPI_Request *req)
{
    return PMPI_Iscan(sbuf, rbuf, count, dt, op, co->native, req);
}

int ftw_xcoll_iexscan(ftw_coll_t *co, const void *sbuf, void *rbuf,
                      int count, MPI_Datatype dt, MPI_Op op,
                      MPI_Request *req)
{
    return PMPI_Iexscan(sbuf, rbuf, count, dt, op, co->native, req);
}

/* At the root of a gather or scatter, the survivors' counts and
 * displacements in owned memory (*a_p: counts, then displs): the user's
 * counts and displs picked, or count elements a rank if counts is NULL.
 * Elsewhere they are not significant and *a_p is left alone. */
static int root_layout(ftw_coll_t *co, int root, const int counts[],
                       const int displs[], int count, int **a_p)
{
    int n = co->c->nsurv, *a, rc = MPI_SUCCESS;

    if (co->c->is_inter ? root != MPI_ROOT : co->c->rank != root)
        return MPI_SUCCESS;
    a = owned_ints(co, 2 * n);
    if (a == NULL)
        return MPI_ERR_NO_MEM;
    if (counts != NULL)
        layout_pick(co->c, counts, displs, a, a + n);
    else
        rc = layout_plain(co, count, a, a + n);
    if (rc == MPI_SUCCESS)
        *a_p = a;
    return rc;
}

/* Gatherv at the root's survivor rank.  MPI_IN_PLACE at the root leaves
 * its block where it is: at its displacement, its user rank's place. */
static int gather_post(ftw_coll_t *co, const void *sbuf, int scount,
                       MPI_Datatype stype, void *rbuf, const int rcounts[],
                       const int displs[], int rcount, MPI_Datatype rtype,
                       int root, MPI_Request *req)
{
    int sroot = xcoll_root(co, root), *a = NULL, rc;

    if (sroot == XROOT_OUT)
        return FTW_ERR_PROC_FAIL_STOP;
    rc = root_layout(co, root, rcounts, displs, rcount, &a);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Igatherv(sbuf, scount, stype, rbuf, a,
                           a ? a + co->c->nsurv : NULL, rtype, sroot,
                           co->native, req);
    return xcoll_done(co, rc);
}

int ftw_xcoll_igather(ftw_coll_t *co, const void *sbuf, int scount,
                      MPI_Datatype stype, void *rbuf, int rcount,
                      MPI_Datatype rtype, int root, MPI_Request *req)
{
    return gather_post(co, sbuf, scount, stype, rbuf, NULL, NULL, rcount,
                       rtype, root, req);
}

int ftw_xcoll_igatherv(ftw_coll_t *co, const void *sbuf, int scount,
                       MPI_Datatype stype, void *rbuf, const int rcounts[],
                       const int displs[], MPI_Datatype rtype, int root,
                       MPI_Request *req)
{
    return gather_post(co, sbuf, scount, stype, rbuf, rcounts, displs, 0,
                       rtype, root, req);
}

/* Scatterv from the root's survivor rank.  MPI_IN_PLACE (rbuf, at the
 * root) leaves the root's own block in place. */
static int scatter_post(ftw_coll_t *co, const void *sbuf,
                        const int scounts[], const int displs[], int scount,
                        MPI_Datatype stype, void *rbuf, int rcount,
                        MPI_Datatype rtype, int root, MPI_Request *req)
{
    int sroot = xcoll_root(co, root), *a = NULL, rc;

    if (sroot == XROOT_OUT)
        return FTW_ERR_PROC_FAIL_STOP;
    rc = root_layout(co, root, scounts, displs, scount, &a);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Iscatterv(sbuf, a, a ? a + co->c->nsurv : NULL, stype,
                            rbuf, rcount, rtype, sroot, co->native, req);
    return xcoll_done(co, rc);
}

int ftw_xcoll_iscatter(ftw_coll_t *co, const void *sbuf, int scount,
                       MPI_Datatype stype, void *rbuf, int rcount,
                       MPI_Datatype rtype, int root, MPI_Request *req)
{
    return scatter_post(co, sbuf, NULL, NULL, scount, stype, rbuf, rcount,
                        rtype, root, req);
}

int ftw_xcoll_iscatterv(ftw_coll_t *co, const void *sbuf,
                        const int scounts[], const int displs[],
                        MPI_Datatype stype, void *rbuf, int rcount,
                        MPI_Datatype rtype, int root, MPI_Request *req)
{
    return scatter_post(co, sbuf, scounts, displs, 0, stype, rbuf, rcount,
                        rtype, root, req);
}

/* Allgatherv; with MPI_IN_PLACE each rank's block is already at its
 * displacement, its user rank's place. */
int ftw_xcoll_iallgather(ftw_coll_t *co, const void *sbuf, int scount,
                         MPI_Datatype stype, void *rbuf, int rcount,
                         MPI_Datatype rtype, MPI_Request *req)
{
    int n = co->c->nsurv, *a = owned_ints(co, 2 * n), rc;

    if (a == NULL)
        return MPI_ERR_NO_MEM;
    rc = layout_plain(co, rcount, a, a + n);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Iallgatherv(sbuf, scount, stype, rbuf, a, a + n, rtype,
                              co->native, req);
    return xcoll_done(co, rc);
}

int ftw_xcoll_iallgatherv(ftw_coll_t *co, const void *sbuf, int scount,
                          MPI_Datatype stype, void *rbuf,
                          const int rcounts[], const int displs[],
                          MPI_Datatype rtype, MPI_Request *req)
{
    int n = co->c->nsurv, *a = owned_ints(co, 2 * n), rc;

    if (a == NULL)
        return MPI_ERR_NO_MEM;
    layout_pick(co->c, rcounts, displs, a, a + n);
    rc = PMPI_Iallgatherv(sbuf, scount, stype, rbuf, a, a + n, rtype,
                          co->native, req);
    return xcoll_done(co, rc);
}

/* Alltoallv.  With MPI_IN_PLACE the send side is ignored and the data
 * comes from the receive layout; the receive arrays stand in for the send
 * ones, as some MPIs check them anyway. */
int ftw_xcoll_ialltoall(ftw_coll_t *co, const void *sbuf, int scount,
                        MPI_Datatype stype, void *rbuf, int rcount,
                        MPI_Datatype rtype, MPI_Request *req)
{
    int n = co->c->nsurv, *a = owned_ints(co, 4 * n), *s = a, rc;

    if (a == NULL)
        return MPI_ERR_NO_MEM;
    rc = layout_plain(co, rcount, a, a + n);
    if (rc == MPI_SUCCESS && sbuf != MPI_IN_PLACE) {
        s = a + 2 * n;
        rc = layout_plain(co, scount, s, s + n);
    }
    if (sbuf == MPI_IN_PLACE)
        stype = rtype;
    if (rc == MPI_SUCCESS)
        rc = PMPI_Ialltoallv(sbuf, s, s + n, stype, rbuf, a, a + n, rtype,
                             co->native, req);
    return xcoll_done(co, rc);
}

int ftw_xcoll_ialltoallv(ftw_coll_t *co, const void *sbuf,
                         const int scounts[], const int sdispls[],
                         MPI_Datatype stype, void *rbuf, const int rcounts[],
                         const int rdispls[], MPI_Datatype rtype,
                         MPI_Request *req)
{
    int n = co->c->nsurv, *a = owned_ints(co, 4 * n), *s = a, rc;

    if (a == NULL)
        return MPI_ERR_NO_MEM;
    layout_pick(co->c, rcounts, rdispls, a, a + n);
    if (sbuf != MPI_IN_PLACE) {
        s = a + 2 * n;
        layout_pick(co->c, scounts, sdispls, s, s + n);
    } else {
        stype = rtype;
    }
    rc = PMPI_Ialltoallv(sbuf, s, s + n, stype, rbuf, a, a + n, rtype,
                         co->native, req);
    return xcoll_done(co, rc);
}

/* The survivors' counts, byte displacements and types. */
int ftw_xcoll_ialltoallw(ftw_coll_t *co, const void *sbuf,
                         const int scounts[], const int sdispls[],
                         const MPI_Datatype stypes[], void *rbuf,
                         const int rcounts[], const int rdispls[],
                         const MPI_Datatype rtypes[], MPI_Request *req)
{
    int n = co->c->nsurv, *a, rc;
    MPI_Datatype *t;

    if (sbuf == MPI_IN_PLACE)
        return alltoallw_inplace(co, rbuf, rcounts, rdispls, rtypes, req);
    /* Types first: they are at least as aligned as int. */
    t = owned_alloc(co, (sizeof(*t) * 2 + sizeof(*a) * 4) * (size_t)n);
    if (t == NULL)
        return MPI_ERR_NO_MEM;
    a = (int *)(t + 2 * n);
    types_pick(co->c, rtypes, t);
    types_pick(co->c, stypes, t + n);
    layout_pick(co->c, rcounts, rdispls, a, a + n);
    layout_pick(co->c, scounts, sdispls, a + 2 * n, a + 3 * n);
    rc = PMPI_Ialltoallw(sbuf, a + 2 * n, a + 3 * n, t + n, rbuf, a, a + n,
                         t, co->native, req);
    return xcoll_done(co, rc);
}

/* The send buffer (with MPI_IN_PLACE, rbuf) holds the blocks of all user
 * ranks; the survivors' comm takes the survivors' blocks only. */
int ftw_xcoll_ireduce_scatter(ftw_coll_t *co, const void *sbuf, void *rbuf,
                              const int rcounts[], MPI_Datatype dt,
                              MPI_Op op, MPI_Request *req)
{
    const void *src = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
    blocks_t b;
    void *buf;
    int *counts, s, rc;

    if (co->c->is_inter)
        return xcoll_inter_unsupported(co);
    rc = blocks_init(&b, rcounts, 0, dt);
    if (rc != MPI_SUCCESS)
        return rc;
    rc = blocks_pack(co, &b, src, co->c->nsurv, &buf, &counts);
    if (rc != MPI_SUCCESS)
        return rc;
    for (s = 0; s < co->c->nsurv; s++)
        counts[s] = rcounts[co->c->surv[s]];
    rc = PMPI_Ireduce_scatter(buf, rbuf, counts, dt, op, co->native, req);
    return xcoll_done(co, rc);
}

int ftw_xcoll_ireduce_scatter_block(ftw_coll_t *co, const void *sbuf,
                                    void *rbuf, int rcount, MPI_Datatype dt,
                                    MPI_Op op, MPI_Request *req)
{
    const void *src = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
    blocks_t b;
    void *buf;
    int *unused, rc;

    if (co->c->is_inter)
        return xcoll_inter_unsupported(co);
    rc = blocks_init(&b, NULL, rcount, dt);
    if (rc != MPI_SUCCESS)
        return rc;
    rc = blocks_pack(co, &b, src, 0, &buf, &unused);
    if (rc != MPI_SUCCESS)
        return rc;
    rc = PMPI_Ireduce_scatter_block(buf, rbuf, rcount, dt, op, co->native,
                                    req);
    return xcoll_done(co, rc);
}
